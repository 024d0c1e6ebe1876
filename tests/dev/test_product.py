"""The README run command starts every process after `migrate` (which installs the schedules)."""

from __future__ import annotations

from django.core.management import get_commands

from dev import cli, product


def test_run_migrates_first_which_installs_the_schedules() -> None:
    # The schedules come from migrate's post-migrate step (tests/jobs/test_migrate_hooks.py),
    # exactly as in the compose files' migrate service: no separate step to forget.
    assert product.SETUP_STEPS[0] == ["migrate", "--noinput"]


def test_run_starts_every_process_with_real_commands() -> None:
    assert set(product.PROCESSES) == {"web", "worker", "webhooks", "jobs", "scheduler"}
    commands = get_commands()
    argvs = [program.argv for program in product.PROCESSES.values()]
    for argv in [*argvs, *product.SETUP_STEPS]:
        command = argv[1] if argv[0] == "manage.py" else argv[0]
        assert command in commands, f"unknown management command {command!r}"


def test_usage_lists_every_process_with_its_description() -> None:
    for name, program in product.PROCESSES.items():
        assert f"{name.ljust(9)}  {program.description}" in cli.USAGE


def test_process_table_runs_the_venv_python_on_the_chosen_port() -> None:
    web = product.process_table(8123)["web"]
    assert web.argv[0].endswith("/.venv/bin/python")
    assert web.argv[1:] == ["manage.py", "runserver", "127.0.0.1:8123", "--noreload"]
