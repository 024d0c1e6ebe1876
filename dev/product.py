"""What `python3 -m dev run` starts: the setup steps, then the product's processes."""

from __future__ import annotations

import dataclasses
import signal

from dev.bootstrap import REPO_ROOT, VENV_PYTHON
from dev.console import DevError
from dev.supervisor import Program

WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 8000
RUN_LOCK_FILE = REPO_ROOT / ".run.lock"


def manage(command: str) -> list[str]:
    """argv of a manage.py command written as one string (no quoting needed)."""
    return ["manage.py", *command.split()]


#: Long-running processes: argv passed to the venv's python, executed from the repository root.
#: ``{port}`` is replaced by $PORT (default 8000).
PROCESSES: dict[str, Program] = {
    "web": Program(
        manage(f"runserver {WEB_HOST}:{{port}} --noreload"),
        "runserver on 127.0.0.1:$PORT: admin, API, /api/v1/health",
        # runserver exits cleanly on KeyboardInterrupt; SIGTERM would end it mid-response.
        stop_signal=signal.SIGINT,
    ),
    "worker": Program(
        manage("drain_events"),
        "drain_events: the drain consumers and the outbox relay",
    ),
    "webhooks": Program(
        manage("deliver_webhooks"),
        "deliver_webhooks: sends the webhook deliveries",
    ),
    "jobs": Program(
        # Running jobs get 15 s to finish on a stop, inside the supervisor's 20 s grace period.
        manage("rundramatiq --processes 1 --threads 4 --worker-shutdown-timeout 15000"),
        "rundramatiq: broker-run consumers and scheduled jobs",
    ),
    "scheduler": Program(
        manage("run_scheduler"),
        "run_scheduler: fires the job schedules (one leader of many)",
    ),
}

#: manage.py steps performed before starting PROCESSES.
SETUP_STEPS: list[list[str]] = [
    ["migrate", "--noinput"],  # also installs the default job schedules (post-migrate)
    ["bootstrap_demo"],
]


def manage_py() -> list[str]:
    """argv prefix for running manage.py with the venv's python."""
    if not (REPO_ROOT / "manage.py").is_file():
        raise DevError(f"{REPO_ROOT / 'manage.py'} is missing.")
    return [str(VENV_PYTHON), "manage.py"]


def setup_commands() -> list[list[str]]:
    """SETUP_STEPS as full argv."""
    return [[*manage_py(), *step] for step in SETUP_STEPS]


def process_table(port: int) -> dict[str, Program]:
    """PROCESSES with the venv python prepended and {port} filled in."""
    return {
        name: dataclasses.replace(
            program,
            argv=[str(VENV_PYTHON), *(arg.replace("{port}", str(port)) for arg in program.argv)],
        )
        for name, program in PROCESSES.items()
    }


def process_list(indent: int) -> str:
    """One line per process, name and description, for the usage text."""
    width = max(len(name) for name in PROCESSES)
    return "\n".join(
        f"{' ' * indent}{name.ljust(width)}  {program.description}"
        for name, program in PROCESSES.items()
    )
