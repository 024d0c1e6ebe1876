"""Python version check and the project's virtualenv (standard library only).

The virtualenv lives in ``.venv``. `run` (and `manage`, `db`) need the product's requirements
only (``requirements.txt``); `test` needs the test and lint tools too (``requirements-dev.txt``,
which includes them). Each set is (re)installed when its files change: the venv keeps a stamp
with one digest per installed set (``runtime <sha256>``, ``dev <sha256>``). The dev set includes
the runtime one, so installing it stamps both; a runtime install keeps the dev line, whose digest
(over the runtime files too) no longer matches once those changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from dev.console import DevError, say

MIN_PYTHON = (3, 11)
REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_DIR = REPO_ROOT / ".venv"
VENV_PYTHON = VENV_DIR / "bin" / "python"
# What each set installs, and the files whose contents its digest covers.
REQUIREMENTS = {
    "runtime": ("requirements.txt", ("requirements.txt", "constraints.txt")),
    "dev": (
        "requirements-dev.txt",
        ("requirements.txt", "requirements-dev.txt", "constraints.txt"),
    ),
}
STAMP_FILE = VENV_DIR / ".deskcomm-requirements.sha256"
PIP_INSTALL = ("-m", "pip", "--disable-pip-version-check", "install", "--quiet")


def check_python() -> None:
    """Refuse to run on interpreters older than MIN_PYTHON."""
    if sys.version_info < MIN_PYTHON:
        wanted = ".".join(map(str, MIN_PYTHON))
        found = ".".join(map(str, sys.version_info[:3]))
        raise DevError(f"Python {wanted}+ is required, this is Python {found} ({sys.executable}).")


def requirements_digest(kind: str = "dev") -> str:
    """SHA-256 over the contents of the requirement files of `kind` ("runtime" or "dev")."""
    digest = hashlib.sha256()
    for name in REQUIREMENTS[kind][1]:
        path = REPO_ROOT / name
        if not path.is_file():
            raise DevError(f"{path} is missing.")
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def read_stamp() -> dict[str, str]:
    """{set: digest} of what the venv has installed. A stamp of one bare digest (written before
    there were two sets) is the dev set's, which it installed."""
    if not STAMP_FILE.is_file():
        return {}
    stamps: dict[str, str] = {}
    for line in STAMP_FILE.read_text().splitlines():
        kind, _, digest = line.strip().rpartition(" ")
        if digest:
            stamps[kind or "dev"] = digest
    return stamps


def is_installed(kind: str, stamps: dict[str, str]) -> bool:
    """Whether the venv has the current `kind` set (the dev set includes the runtime one)."""
    kinds = ("runtime", "dev") if kind == "runtime" else ("dev",)
    return any(stamps.get(k) == requirements_digest(k) for k in kinds)


def write_stamp(kind: str, stamps: dict[str, str]) -> None:
    installed = ("runtime", "dev") if kind == "dev" else ("runtime",)
    stamps = {**stamps, **{k: requirements_digest(k) for k in installed}}
    STAMP_FILE.write_text("".join(f"{k} {stamps[k]}\n" for k in sorted(stamps)))


def venv_is_usable() -> bool:
    """True when .venv has a working interpreter that is new enough."""
    if not VENV_PYTHON.exists():
        return False
    check = f"import sys; sys.exit(sys.version_info < {MIN_PYTHON!r})"
    result = subprocess.run([str(VENV_PYTHON), "-c", check], capture_output=True, check=False)
    return result.returncode == 0


def create_venv() -> None:
    """Create .venv with the running interpreter (replacing a broken one)."""
    if importlib.util.find_spec("venv") is None or importlib.util.find_spec("ensurepip") is None:
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        raise DevError(
            f"{sys.executable} cannot create virtualenvs (the venv/ensurepip modules are missing). "
            "On Debian/Ubuntu install the 'python3-venv' package "
            f"(e.g. sudo apt-get install python3-venv python{version}-venv)."
        )
    say(f"creating virtualenv in {VENV_DIR} ...")
    result = subprocess.run(
        [sys.executable, "-m", "venv", "--clear", str(VENV_DIR)],
        stdout=sys.stderr,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(VENV_DIR, ignore_errors=True)
        raise DevError(
            "creating the virtualenv failed (see above). On Debian/Ubuntu this usually means the "
            "'python3-venv' package is missing."
        )
    upgrade = [str(VENV_PYTHON), *PIP_INSTALL, "--upgrade", "pip"]
    if subprocess.run(upgrade, stdout=sys.stderr, check=False).returncode != 0:
        say("warning: upgrading pip failed; continuing with the bundled pip")


def ensure_venv(kind: str = "dev") -> None:
    """Create .venv if needed and install the `kind` requirements ("runtime": the product's,
    for `run`; "dev": with the test and lint tools, for `test`) when they changed."""
    if not venv_is_usable():
        create_venv()
    stamps = read_stamp()
    if is_installed(kind, stamps):
        return
    requirements = REQUIREMENTS[kind][0]
    say(f"installing requirements from {requirements} (first run takes a few minutes) ...")
    # pip byte-compiles every package here (half of the install's time), and that must stay:
    # with PYTHONDONTWRITEBYTECODE set (as on CI machines) no process would write the bytecode
    # later, so each Django process would compile Django and every library from source again.
    command = [str(VENV_PYTHON), *PIP_INSTALL, "-r", str(REPO_ROOT / requirements)]
    if subprocess.run(command, cwd=REPO_ROOT, stdout=sys.stderr, check=False).returncode != 0:
        raise DevError("installing requirements failed (see pip's output above).")
    write_stamp(kind, stamps)


def child_env(database_url: str | None = None) -> dict[str, str]:
    """Environment for project processes: the venv first on PATH, DATABASE_URL exported."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(VENV_DIR)
    env["PATH"] = os.pathsep.join([str(VENV_DIR / "bin"), env.get("PATH", os.defpath)])
    env.pop("PYTHONHOME", None)
    # A human-readable console locally; production's default is JSON lines.
    env.setdefault("LOG_FORMAT", "plain")
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env
