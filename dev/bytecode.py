"""The project's own modules compiled once before a test run.

pip byte-compiles the libraries when it installs them. The project's modules are compiled by
whichever process imports them first and cached in `__pycache__/`, unless the environment sets
PYTHONDONTWRITEBYTECODE (this project's CI machines do): then nothing is ever cached, and every
Python process the suite starts (four pytest workers, hundreds of `manage.py` and worker
processes) compiles the project from source again: about 4 s of CPU per pytest worker's
collection and 0.25 s per Django process. `compileall` writes the cache whatever that variable
says, and Python reads an existing cache either way. The user's environment is left as it is.
"""

from __future__ import annotations

import subprocess
import sys

from dev.bootstrap import REPO_ROOT, VENV_PYTHON
from dev.console import say

SKIPPED = {".venv", ".git", "node_modules"}


def project_sources() -> list[str]:
    """The repository's top-level packages (a folder with __init__.py) and scripts."""
    packages = [
        path.name
        for path in sorted(REPO_ROOT.iterdir())
        if path.is_dir() and path.name not in SKIPPED and (path / "__init__.py").is_file()
    ]
    scripts = [path.name for path in sorted(REPO_ROOT.glob("*.py"))]
    return packages + scripts


def compile_project() -> None:
    """Compile the project's modules with the venv's interpreter (all CPUs; a failure to compile
    is reported by the import that needs the module, so it only warns here)."""
    command = [str(VENV_PYTHON), "-m", "compileall", "-q", "-j", "0", *project_sources()]
    done = subprocess.run(
        command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=sys.stderr, check=False
    )
    if done.returncode != 0:
        say("warning: compiling the project's modules failed for some files (see above)")
