"""The README run command starts every process after `migrate` (which installs the schedules)."""

from __future__ import annotations

from django.core.management import get_commands

from deskcomm import dev


def test_run_migrates_first_which_installs_the_schedules() -> None:
    # The schedules come from migrate's post-migrate step (tests/deskcomm/test_migrate_hooks.py),
    # exactly as in the compose files' migrate service: no separate step to forget.
    assert dev.SETUP_STEPS[0] == ["migrate", "--noinput"]


def test_run_starts_every_process_with_real_commands() -> None:
    assert set(dev.PROCESSES) == {"web", "worker", "webhooks", "jobs", "scheduler"}
    commands = get_commands()
    for argv in [*dev.PROCESSES.values(), *dev.SETUP_STEPS]:
        command = argv[1] if argv[0] == "manage.py" else argv[0]
        assert command in commands, f"unknown management command {command!r}"
