"""No credential is committed (seed 001 §7.5): detect-secrets over every tracked file.

`.secrets.baseline` lists the reviewed findings (test fixtures, placeholder URLs with a user and
password in the docs, the refused development SECRET_KEY), each marked `is_secret: false`.
Anything else a scan finds fails the suite. After reviewing a new false positive, refresh the
baseline with `detect-secrets scan --baseline .secrets.baseline` (or mark the line
`# pragma: allowlist secret`).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from detect_secrets import SecretsCollection
from detect_secrets.settings import transient_settings

REPO = Path(__file__).resolve().parent.parent
BASELINE = REPO / ".secrets.baseline"

Finding = tuple[str, str, str]  # file, type, hashed secret (line numbers move; these do not)


def baseline() -> dict[str, object]:
    loaded: dict[str, object] = json.loads(BASELINE.read_text())
    return loaded


def scan(paths: list[str], cwd: Path) -> set[tuple[Finding, int]]:
    """Findings with their line numbers, scanned with the baseline's plugins and filters."""
    saved = baseline()
    with transient_settings({k: saved[k] for k in ("plugins_used", "filters_used")}):
        found = SecretsCollection(root=str(cwd))
        found.scan_files(*paths)
    return {((name, s.type, s.secret_hash), s.line_number or 0) for name, s in found}


def reviewed() -> set[Finding]:
    results: dict[str, list[dict[str, object]]] = baseline()["results"]  # type: ignore[assignment]
    return {
        (name, str(item["type"]), str(item["hashed_secret"]))
        for name, items in results.items()
        for item in items
        if item.get("is_secret") is False
    }


def tracked_files() -> list[str]:
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    return [p for p in listing.split("\0") if p and p != BASELINE.name and (REPO / p).is_file()]


@pytest.mark.slow
def test_no_credential_is_committed() -> None:
    new = sorted(
        (finding, line) for finding, line in scan(tracked_files(), REPO)
        if finding not in reviewed()
    )  # fmt: skip
    assert not new, "possible secrets (file, type, hash), line: " + "; ".join(map(str, new))


def test_the_scan_catches_a_committed_key(tmp_path: Path) -> None:
    # Built at run time so this file itself holds no key-shaped literal.
    access_key = "AKIA" + "Z7QH2M4XKD9PLW3N"
    private = "-----BEGIN RSA " + "PRIVATE KEY-----"
    (tmp_path / "settings_local.py").write_text(
        f'AWS_KEY = "{access_key}"\nKEY = """{private}"""\n'
    )
    types = {finding[1] for finding, _ in scan(["settings_local.py"], tmp_path)}
    assert {"AWS Access Key", "Private Key"} <= types
