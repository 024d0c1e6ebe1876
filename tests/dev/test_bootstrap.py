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


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A checkout with its three requirement files and a usable venv whose installs are
    recorded (the requirement file each pip run was given), not run."""
    for name in ("requirements.txt", "requirements-dev.txt", "constraints.txt"):
        (tmp_path / name).write_text(f"# {name}\n")
    monkeypatch.setattr(bootstrap, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(bootstrap, "STAMP_FILE", tmp_path / "stamp")
    monkeypatch.setattr(bootstrap, "venv_is_usable", lambda: True)
    installs: list[str] = []

    def pip(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        installs.append(Path(command[-1]).name)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bootstrap.subprocess, "run", pip)
    return installs


def test_run_installs_the_runtime_requirements_and_test_adds_the_dev_tools(
    checkout: list[str],
) -> None:
    bootstrap.ensure_venv("runtime")
    bootstrap.ensure_venv("runtime")
    assert checkout == ["requirements.txt"]
    bootstrap.ensure_venv("dev")
    bootstrap.ensure_venv("dev")
    bootstrap.ensure_venv("runtime")  # the dev set includes the runtime one
    assert checkout == ["requirements.txt", "requirements-dev.txt"]


def test_each_set_is_installed_again_when_its_files_change(checkout: list[str]) -> None:
    bootstrap.ensure_venv("dev")
    (bootstrap.REPO_ROOT / "requirements-dev.txt").write_text("pytest==9.9\n")
    bootstrap.ensure_venv("runtime")  # a test tool changed: nothing for `run`
    bootstrap.ensure_venv("dev")
    assert checkout == ["requirements-dev.txt", "requirements-dev.txt"]
    (bootstrap.REPO_ROOT / "constraints.txt").write_text("idna==9.9\n")
    bootstrap.ensure_venv("runtime")
    bootstrap.ensure_venv("runtime")
    bootstrap.ensure_venv("dev")  # the runtime files changed under the dev set too
    assert checkout[2:] == ["requirements.txt", "requirements-dev.txt"]


def test_a_stamp_from_before_the_two_sets_counts_as_the_dev_set(checkout: list[str]) -> None:
    bootstrap.STAMP_FILE.write_text(bootstrap.requirements_digest("dev") + "\n")
    bootstrap.ensure_venv("runtime")
    bootstrap.ensure_venv("dev")
    assert checkout == []


def test_run_manage_and_db_want_the_runtime_set_and_test_the_dev_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dev import cli

    class Stop(Exception):
        pass

    wanted: list[str] = []
    monkeypatch.setattr(cli, "ensure_venv", wanted.append)

    def no_database(*_: object) -> None:
        raise Stop

    monkeypatch.setattr(cli, "ensure_database", no_database)
    for command in (
        lambda: cli.cmd_test([]),
        lambda: cli.cmd_manage(["check"]),
        lambda: cli.cmd_db([]),
        lambda: cli.run_environment(8000).__enter__(),
    ):
        with pytest.raises(Stop):
            command()
    assert wanted == ["dev", "runtime", "runtime", "runtime"]


@pytest.mark.parametrize(("dotenv", "said"), [(True, "then "), (False, "no .env; copy")])
def test_run_says_where_the_settings_come_from(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    dotenv: bool,
    said: str,
) -> None:
    from dev import cli

    if dotenv:
        (tmp_path / ".env").write_text("DEBUG=true\n")
    monkeypatch.setattr(cli, "REPO_ROOT", tmp_path)
    cli.say_settings_source()
    line = capsys.readouterr().err
    assert line.startswith("[dev] settings:") and said in line and "not found" not in line
