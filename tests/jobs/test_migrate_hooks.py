"""`migrate` alone leaves every install path with the default schedules (jobs.migrate_hooks)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from core.db import drop_database
from jobs.registry import jobs
from tests.support.db import database_url
from tests.support.processes import REPO, subprocess_env
from tests.test_deploy import COMPOSE_FILES, load

MIGRATE = ["manage.py", "migrate", "--noinput"]


@pytest.fixture
def fresh_database(db: None) -> Iterator[str]:
    """An empty database next to the test database; its URL."""
    name = f"{connection.settings_dict['NAME']}_fresh_migrate"
    admin_url = database_url()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        drop_database(conn, name)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            drop_database(conn, name)


def manage(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=subprocess_env(DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def schedules(url: str) -> dict[str, bool]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT name, enabled FROM django_celery_beat_periodictask").fetchall()
    return dict(rows)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_the_compose_migrate_service_is_a_bare_migrate(name: str) -> None:
    # What test_a_bare_migrate_installs_... runs, so the container install ends the same way.
    command = load(name)["services"]["migrate"]["command"]
    assert command == ["python", *MIGRATE]


def test_the_test_database_migrated_has_every_default_schedule(db: None) -> None:
    from django_celery_beat.models import PeriodicTask

    assert set(jobs.names()) <= set(PeriodicTask.objects.values_list("name", flat=True))


@pytest.mark.slow
def test_a_bare_migrate_installs_the_schedules_keeps_edits_and_survives_zero(
    fresh_database: str,
) -> None:
    first = manage(fresh_database, *MIGRATE)
    assert first.returncode == 0, first.stderr
    installed = schedules(fresh_database)
    assert set(installed) == set(jobs.names()) and all(installed.values())

    with psycopg.connect(fresh_database) as conn:  # an operator disables one in the admin
        conn.execute(
            "UPDATE django_celery_beat_periodictask SET enabled = false WHERE name = 'backup'"
        )
    again = manage(fresh_database, *MIGRATE)
    assert again.returncode == 0, again.stderr
    assert schedules(fresh_database)["backup"] is False

    zero = manage(fresh_database, *MIGRATE[:2], "eventbus", "zero", "--noinput")
    assert zero.returncode == 0, zero.stderr  # no post-migrate crash on the missing tables
    assert "Traceback" not in zero.stderr
