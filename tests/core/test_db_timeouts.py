"""Database timeouts: on every Django connection, per process role, lifted for migrate."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.models.signals import pre_migrate

from core.db_timeouts import TIMEOUTS, with_timeouts
from tests.support.db import raw_connection
from tests.support.processes import REPO, subprocess_env

pytestmark = pytest.mark.django_db
SETTINGS_SQL = "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)"

# Run in a fresh process (settings are read at start-up): reports the connection's timeouts,
# then what the Django connection says to a statement or a lock wait that takes too long.
PROBE = """
import json, sys, django
django.setup()
from django.db import DatabaseError, connection
from core.db_timeouts import TIMEOUTS, use_database_timeouts

def timeouts():
    names = list(TIMEOUTS)
    with connection.cursor() as cursor:
        cursor.execute("SELECT name, setting FROM pg_settings WHERE name = ANY(%s)", [names])
        return dict(cursor.fetchall())

def error_of(sql, params=()):
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
    except DatabaseError as exc:
        return str(exc)
    return None

report = {"web": timeouts()}
report["sleep"] = error_of("SELECT pg_sleep(30)")
LOCK_WAIT = "UPDATE deskcomm_organization SET slug = slug WHERE id = %s"
report["lock"] = error_of(LOCK_WAIT, sys.argv[1:])
use_database_timeouts("worker")
report["worker"] = timeouts()
print(json.dumps(report))
"""


def probe(organization_id: object, **env: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(organization_id)],
        env=subprocess_env(**env),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout.splitlines()[-1]))


def server_timeouts() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(SETTINGS_SQL, [list(TIMEOUTS)])
        return dict(cursor.fetchall())


def in_milliseconds(timeouts: dict[str, float]) -> dict[str, str]:
    return {name: str(round(seconds * 1000)) for name, seconds in timeouts.items()}


def test_libpq_options_carry_the_timeouts_and_keep_other_flags() -> None:
    options = with_timeouts(
        "-c search_path=crm -c statement_timeout=1", {"statement_timeout": 2.5, "lock_timeout": 0}
    )
    assert options == "-c search_path=crm -c statement_timeout=2500 -c lock_timeout=0"
    assert with_timeouts("", {"lock_timeout": 10}) == "-c lock_timeout=10000"


def test_the_test_suites_own_connection_has_the_web_timeouts() -> None:
    assert server_timeouts() == in_milliseconds(settings.DATABASE_TIMEOUTS["web"])


@pytest.mark.django_db(transaction=True)
def test_statements_and_lock_waits_past_their_timeout_fail_and_workers_get_theirs(
    org: Any,
) -> None:
    with raw_connection() as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT FROM deskcomm_organization WHERE id = %s FOR UPDATE", [org.pk])
        report = probe(
            org.pk,
            DB_STATEMENT_TIMEOUT="2",
            DB_WORKER_STATEMENT_TIMEOUT="7",
            DB_LOCK_TIMEOUT="0.5",
            DB_IDLE_IN_TRANSACTION_TIMEOUT="30",
        )
        holder.execute("ROLLBACK")
    assert report["web"] == {
        "statement_timeout": "2000",
        "lock_timeout": "500",
        "idle_in_transaction_session_timeout": "30000",
    }
    assert "canceling statement due to statement timeout" in report["sleep"]
    assert "canceling statement due to lock timeout" in report["lock"]
    assert report["worker"] == {**report["web"], "statement_timeout": "7000"}


def test_migrate_runs_without_a_statement_timeout_and_restores_it() -> None:
    during: list[dict[str, str]] = []

    def record(**kwargs: object) -> None:
        during.append(server_timeouts())

    pre_migrate.connect(record)  # connected after deskcomm's receiver: runs after it
    try:
        call_command("migrate", verbosity=0)
    finally:
        pre_migrate.disconnect(record)
    web = in_milliseconds(settings.DATABASE_TIMEOUTS["web"])
    # The last pre_migrate is sent right before the migrations run: what they run with.
    assert during[-1]["statement_timeout"] == "0"
    assert during[-1]["lock_timeout"] == web["lock_timeout"]  # a blocked migration still fails
    assert server_timeouts() == web
