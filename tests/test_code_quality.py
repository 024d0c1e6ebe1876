"""The tree stays ruff- and mypy-clean (run as part of the test command)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def run_tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_ruff_is_clean() -> None:
    result = run_tool("ruff", "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    result = run_tool("mypy", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def _pins(path: Path) -> dict[str, str]:
    """name -> version of the `name==version` lines (extras dropped, names normalised)."""
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"{path.name}: {raw!r} is not pinned with =="
        pins[canonical(name.split("[", 1)[0])] = version
    return pins


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_dependency_is_pinned_and_locked() -> None:
    direct = {**_pins(REPO / "requirements.txt"), **_pins(REPO / "requirements-dev.txt")}
    locked = _pins(REPO / "constraints.txt")
    assert "-c constraints.txt" in (REPO / "requirements.txt").read_text()
    assert {name: locked.get(name) for name in direct} == direct  # the lock agrees with the pins
    # Everything installed in this environment (what the requirements pulled in) is locked.
    installed = {
        canonical(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
    }
    unlocked = {
        name: version
        for name, version in installed.items()
        if name not in locked and name not in {"pip", "setuptools", "wheel"}
    }
    assert unlocked == {}, "installed but not in constraints.txt (regenerate it)"
