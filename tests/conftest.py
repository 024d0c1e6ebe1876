"""Shared fixtures: organizations, the side-effect table, in-process and subprocess workers."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from django.db import connection

import tests.support.consumers  # noqa: F401  (registers the test consumers and event types)
from core import rls
from core.models import Organization
from tests.support.receiver import Receiver

REPO = Path(__file__).resolve().parent.parent

# The `browser` fixture (headless Chromium) for the admin browser tests.
pytest_plugins = ["tests.support.browser"]

# The test process is a platform process: it creates every tenant's rows freely. Tests of the
# tenant wall scope their session explicitly (rls.scoped), API requests scope themselves.
rls.bypass_process()

SIDE_EFFECT_TABLE_SQL = """
CREATE TABLE IF NOT EXISTS test_side_effect (
    event_id uuid NOT NULL,
    consumer text NOT NULL,
    runs integer NOT NULL,
    pid integer NOT NULL,
    PRIMARY KEY (event_id, consumer)
)
"""


@pytest.fixture(scope="session", autouse=True)
def _close_broker_pool(django_db_setup: None) -> Iterator[None]:
    """Close the job broker's connection pool before the test database is dropped."""
    yield
    import dramatiq

    dramatiq.get_broker().close()


@pytest.fixture
def org(db: None) -> Organization:
    return Organization.objects.create(name="Acme", slug="acme")


@pytest.fixture
def org_b(db: None) -> Organization:
    return Organization.objects.create(name="Beta", slug="beta")


@pytest.fixture
def side_effects(db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(SIDE_EFFECT_TABLE_SQL)
        cursor.execute("TRUNCATE test_side_effect")
    yield


def side_effect_rows() -> list[tuple[str, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT event_id::text, consumer, runs FROM test_side_effect")
        return list(cursor.fetchall())


def database_url() -> str:
    """The URL of the database the tests run on (pytest-django's test database)."""
    s = connection.settings_dict
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "deskcomm.settings",
            "EVENTBUS_HANDLER_MODULES": "tests.support.consumers",
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


@pytest.fixture
def processes() -> Iterator[list[Drain]]:
    """Drain subprocesses a test started; whatever is still running at the end is killed."""
    started: list[Drain] = []
    yield started
    for process in started:
        process.close()


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


@pytest.fixture
def managed() -> Iterator[list[Managed]]:
    """Collects subprocesses started by a test and kills what is left at the end."""
    started: list[Managed] = []
    yield started
    for process in started:
        process.close()


def wait_for(
    condition: Callable[[], bool], *, timeout: float, what: str | Callable[[], str]
) -> None:
    """Poll with a deadline (no blind sleeps). `what` may be a callable (e.g. process logs)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {described}")
        time.sleep(0.05)


def raw_connection() -> psycopg.Connection:
    """A second, independent connection to the test database."""
    return psycopg.connect(database_url(), autocommit=True)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real HTTP server on 127.0.0.1 (an ephemeral port) recording requests and connections."""
    server = Receiver()
    yield server
    server.close()
