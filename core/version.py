"""The version this process runs, as the console's workers page and the worker registry show it.

Read once per process, the first time it is asked (at start: `core.workers.Presence`), from the
first of:

1. `DESKCOMM_VERSION`, set by the deploy (the image tag deploy/update.sh runs; `latest` says
   nothing and counts as unset);
2. `GIT_COMMIT`, set at image build (the Dockerfile's build argument; its default `unknown`
   counts as unset);
3. `git describe --tags --always --dirty` of the checkout, when it has a `.git` (a local run, a
   clone deployed as is);
4. the project's version in `pyproject.toml`.

It is never "unknown": the project's version is always there.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNSET = ("", "unknown", "latest")
GIT_TIMEOUT_SECONDS = 5


@functools.cache
def version() -> str:
    """This process's version (see the module docstring); cached for the process's life."""
    for name in ("DESKCOMM_VERSION", "GIT_COMMIT"):
        value = os.environ.get(name, "").strip()
        if value not in UNSET:
            return value
    return git_describe(ROOT) or project_version(ROOT)


def git_describe(root: Path) -> str:
    """`git describe` of the checkout at `root` ("" without a .git, git or an answer)."""
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():  # a folder in a clone, a file in a worktree
        return ""
    try:
        result = subprocess.run(  # noqa: S603  (a fixed command on our own checkout)
            [git, "-C", str(root), "describe", "--tags", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return result.stdout.strip() if result.returncode == 0 else ""


def project_version(root: Path) -> str:
    """`[project] version` of pyproject.toml at `root` ("0" when it cannot be read)."""
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return "0"
    return str(data.get("project", {}).get("version") or "0")
