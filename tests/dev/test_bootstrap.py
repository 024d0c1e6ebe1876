"""The dev tooling runs before the virtualenv exists: standard library only, venv first on PATH."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dev import bootstrap

REPO = Path(__file__).resolve().parent.parent.parent
BASE_PYTHON = Path(sys.base_prefix) / "bin" / "python3"


def imported_top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", sorted((REPO / "dev").glob("*.py")), ids=lambda path: path.name)
def test_every_module_imports_only_the_standard_library(path: Path) -> None:
    outside = imported_top_level_names(path) - sys.stdlib_module_names - {"__future__", "dev"}
    assert outside == set()


@pytest.mark.skipif(not BASE_PYTHON.is_file(), reason=f"no base interpreter at {BASE_PYTHON}")
def test_the_system_python_without_the_venv_prints_the_usage() -> None:
    # -E -s: no PYTHONPATH, no user site; the base interpreter has no Django.
    argv = [str(BASE_PYTHON), "-E", "-s", "-m", "dev"]
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("usage: python3 -m dev COMMAND")
    assert "scheduler  run_scheduler" in result.stderr


def test_child_env_puts_the_venv_first_and_exports_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONHOME", "/somewhere")
    env = bootstrap.child_env("postgres://app@127.0.0.1:5432/app")
    assert env["PATH"].split(":")[0] == str(bootstrap.VENV_DIR / "bin")
    assert env["VIRTUAL_ENV"] == str(bootstrap.VENV_DIR)
    assert env["DATABASE_URL"] == "postgres://app@127.0.0.1:5432/app"
    assert "PYTHONHOME" not in env
