"""The test databases of a parallel run: migrated once, then copied for every worker.

Serially (`-n 0`) this is pytest-django's own setup: create `test_deskcomm`, migrate it. Under
pytest-xdist the first worker to need a database creates and migrates `test_deskcomm` (the
others wait on a file lock), and every worker then gets `test_deskcomm_<worker>`, a copy made
by `CREATE DATABASE ... TEMPLATE test_deskcomm`: one migration for the whole run instead of one
per worker. The controller drops the template when the run ends (tests/support/parallel.py
gives it the run's directory). docs/testing.md explains the rules this gives tests.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support.parallel import run_directory, worker_id

READY = "template.ready"
# A copy fails while another session is connected to the template (an autovacuum worker may
# visit it for a moment): retried for this long.
COPY_DEADLINE = 120.0


@pytest.fixture(scope="session")
def django_db_modify_db_settings() -> None:
    """Keep the unsuffixed test database name: under xdist it is the template (see above)."""


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker: Any,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    from django.test.utils import setup_databases, teardown_databases
    from pytest_django.fixtures import _get_databases_for_setup

    verbosity = request.config.option.verbose
    worker = worker_id(request.config)
    aliases, serialized = _get_databases_for_setup(request.session.items)
    setup = {"aliases": aliases, "serialized_aliases": serialized}
    with django_db_blocker.unblock():
        if worker is None:
            config = setup_databases(verbosity=verbosity, interactive=False, **setup)
        elif aliases:  # a run whose tests use no database (tests/deploy alone) makes no template
            _migrated_template(verbosity, setup)
            _use_copy(worker)
        # Only on a database of this run's own: a run whose tests use none altered the configured
        # one instead, from every worker at once ("tuple concurrently updated" on a new cluster).
        if aliases:
            _no_commit_flush()
    yield
    with django_db_blocker.unblock():
        if worker is None:
            teardown_databases(config, verbosity=verbosity)
        elif aliases:
            _drop_copy()


def _migrated_template(verbosity: int, setup: dict[str, Any]) -> None:
    """Create and migrate the template once per run; point the connection at it."""
    from django.db import connection, connections
    from django.test.utils import setup_databases

    directory = run_directory()
    with (directory / "template.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (directory / READY).exists():
            connection.settings_dict["NAME"] = connection.creation._get_test_db_name()
        else:
            setup_databases(verbosity=verbosity, interactive=False, **setup)
            (directory / READY).write_text(str(connection.settings_dict["NAME"]))
        connections.close_all()  # no session may stay on a template that is being copied


def _use_copy(worker: str) -> None:
    from django.db import connection

    template = str(connection.settings_dict["NAME"])
    copy = f"{template}_{worker}"
    with _server(connection.settings_dict) as server:
        _drop(server, copy)
        deadline = time.monotonic() + COPY_DEADLINE
        while True:
            try:
                server.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(copy), sql.Identifier(template)
                    )
                )
                break
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    connection.close()
    connection.settings_dict["NAME"] = copy


def _no_commit_flush() -> None:
    """A commit on the test database does not wait for its WAL to reach the disk (the sessions
    opened from now on): a crash of the server could lose the last commits, which no test
    relies on (a restart is a clean shutdown), and a busy disk no longer stalls every commit."""
    from django.db import connection, connections

    name = str(connection.settings_dict["NAME"])
    with _server(connection.settings_dict) as server:
        server.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(sql.Identifier(name))
        )
    connections.close_all()


def _drop_copy() -> None:
    from django.db import connection, connections

    connections.close_all()
    with _server(connection.settings_dict) as server:
        _drop(server, str(connection.settings_dict["NAME"]))


def drop_template(directory: Path, settings_dict: dict[str, Any]) -> None:
    """The controller's end of the run: drop the template, if a worker made one."""
    ready = directory / READY
    if ready.exists():
        with _server(settings_dict) as server:
            _drop(server, ready.read_text().strip())


def _drop(server: psycopg.Connection[Any], name: str) -> None:
    """Drop `name`, ending the sessions a failed test's subprocess left in it. Not `WITH
    (FORCE)`: it must terminate an autovacuum worker too, which a non-superuser may not, so it
    failed a worker's teardown ("permission denied to terminate process") whenever autovacuum
    was visiting the copy; `core.db.drop_database` ends the client sessions and lets the DROP
    wait for autovacuum."""
    from core.db import drop_database

    drop_database(server, name)


def _server(settings_dict: dict[str, Any]) -> psycopg.Connection[Any]:
    """An autocommit connection to the server's `postgres` database as the test role."""
    return psycopg.connect(
        host=settings_dict["HOST"] or "127.0.0.1",
        port=str(settings_dict["PORT"] or 5432),
        user=settings_dict["USER"],
        password=settings_dict.get("PASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )
