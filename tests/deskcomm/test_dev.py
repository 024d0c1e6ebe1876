"""The README run command starts every process and installs the schedules (deskcomm/dev.py)."""

from __future__ import annotations

from django.core.management import get_commands

from deskcomm import dev


def test_run_installs_the_schedules_before_starting_the_processes() -> None:
    steps = [step[0] for step in dev.SETUP_STEPS]
    assert steps.index("migrate") < steps.index("install_schedules")


def test_run_starts_every_process_with_real_commands() -> None:
    assert set(dev.PROCESSES) == {"web", "worker", "webhooks", "jobs", "scheduler"}
    commands = get_commands()
    for argv in [*dev.PROCESSES.values(), *dev.SETUP_STEPS]:
        command = argv[1] if argv[0] == "manage.py" else argv[0]
        assert command in commands, f"unknown management command {command!r}"
