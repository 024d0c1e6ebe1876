"""Real subprocesses of the project on the test database: `manage.py drain_events`, any other
command in its own process group, and the environment they run with."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.support.db import database_url

REPO = Path(__file__).resolve().parent.parent.parent


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "deskcomm.settings",
            "EVENTBUS_HANDLER_MODULES": "tests.support.consumers",
            # Off as in the test process (tests/conftest.py); the breaker's own tests turn it on.
            "EVENTBUS_BREAKER_ENABLED": "false",
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


class Drain(subprocess.Popen[bytes]):
    """`manage.py drain_events` in a real subprocess; its output goes to a temporary file."""

    def __init__(self, *args: str, **env: str) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in output()/close())
        super().__init__(
            [sys.executable, str(REPO / "manage.py"), "drain_events", *args],
            env=subprocess_env(**env),
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def close(self) -> None:
        if self.poll() is None:
            self.kill()
            self.wait()
        self.log.close()


def start_drain(*args: str, **env: str) -> Drain:
    """Start `manage.py drain_events ARGS` as a real subprocess on the test database."""
    return Drain(*args, **env)


class Managed(subprocess.Popen[bytes]):
    """Any `manage.py COMMAND` in its own process group (rundramatiq forks worker processes)."""

    def __init__(self, *args: str, **env: str) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (closed in close())
        super().__init__(
            [sys.executable, str(REPO / "manage.py"), *args],
            env=subprocess_env(**env),
            cwd=REPO,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signum)

    def close(self) -> None:
        if self.poll() is None:
            self.signal_group(signal.SIGKILL)
            self.wait()
        self.log.close()


def start_jobs(**env: str) -> Managed:
    """The jobs process: `manage.py rundramatiq`, one process, a few threads."""
    return Managed(
        "rundramatiq",
        "--processes",
        "1",
        "--threads",
        "4",
        "--worker-shutdown-timeout",
        "5000",
        **env,
    )
