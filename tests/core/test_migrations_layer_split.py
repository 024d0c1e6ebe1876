"""Upgrading an install from before the layering split: `migrate` moves the models to `core`,
`crm` and `jobs` without touching a table or a row (tests/fixtures/README.md)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from core.db import drop_database
from tests.support.db import database_url
from tests.support.processes import REPO, subprocess_env

# Mirrors of the consumer and catalog registries, rewritten by every `migrate`
# (eventbus.store.routes).
MIRRORS = ("eventbus_route", "eventbus_eventtypeschema")
# The default schedules, which every `migrate` installs for the jobs the code declares.
SCHEDULES = (
    "deskcomm_defaultschedule",
    "django_celery_beat_periodictask",
    "django_celery_beat_intervalschedule",
    "django_celery_beat_crontabschedule",
)
FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "pre_layers.sql.gz"
# Migrations written after the split that change the shape on purpose (not part of the move).
# The last migration of the split; `migrate` to it applies the split and nothing written since.
SPLIT = ("core", "0010_move_out_models")

# What a table is made of, as the catalog says: columns, indexes, constraints, triggers, policies.
SHAPE_SQL = """
SELECT 'column', table_name, column_name || ' ' || data_type || ' ' || is_nullable
  FROM information_schema.columns WHERE table_schema = 'public'
UNION ALL SELECT 'index', tablename, indexdef FROM pg_indexes WHERE schemaname = 'public'
UNION ALL SELECT 'constraint', conrelid::regclass::text, conname || ' ' || pg_get_constraintdef(oid)
  FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL SELECT 'trigger', tgrelid::regclass::text, tgname
  FROM pg_trigger WHERE NOT tgisinternal
UNION ALL SELECT 'policy', tablename, policyname || ' ' || qual FROM pg_policies
ORDER BY 1, 2, 3
"""

# Read back through the new models, in a process of their own.
CHECK_SCRIPT = """
import json
from django.contrib.auth.models import User
from core.models import ApiKey, AuditLog, Organization
from crm.models import Contact, Lead, Order
from jobs.models import JobRun
from lgpd.models import DataRequest
from webhooks.models import Subscription
from eventbus.store.models import EventLog
org = Organization.objects.get(slug="loja-exemplo")
contact = Contact.objects.get(organization=org)
operator = User.objects.get(username="operator")
print(json.dumps({
    "cpf": contact.cpf,
    "lead_stage": Lead.objects.get(organization=org).stage_id,
    "order": Order.objects.values_list("number", "status").get(organization=org),
    "api_keys": ApiKey.objects.filter(organization=org).count(),
    "subscriptions": Subscription.objects.filter(organization=org).count(),
    "request_contact": str(DataRequest.objects.get(organization=org).contact_id),
    "contact": str(contact.pk),
    "job_runs": JobRun.objects.count(),
    "audit": AuditLog.objects.filter(action="seed").count(),
    "events": sorted(EventLog.objects.filter(organization=org).values_list("event_type", flat=1)),
    "perms": sorted(p for p in operator.get_all_permissions() if not p.startswith("auth.")),
}))
"""


@pytest.fixture
def pre_layers_database(db: None) -> Iterator[str]:
    """A database restored from the pre-split fixture, next to the test database; its URL."""
    name = f"{connection.settings_dict['NAME']}_pre_layers"
    admin_url = database_url()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        drop_database(conn, name)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(gzip.decompress(FIXTURE.read_bytes()).decode())
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            drop_database(conn, name)


def run(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        # The fixture's CPF was encrypted with the development key of the default SECRET_KEY.
        env=subprocess_env(
            DATABASE_URL=url, DB_RLS_BYPASS="true", SECRET_KEY="", ENCRYPTION_KEYS_CPF=""
        ),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def catalog(url: str) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    with psycopg.connect(url) as conn:
        shape = conn.execute(SHAPE_SQL).fetchall()
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        conn.execute("SELECT set_config('app.rls_bypass', 'on', false)")  # every tenant's rows
        counts = {
            table: conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
            ).fetchone()[0]
            for table in tables
        }
    return shape, counts


def content_type_labels(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT DISTINCT app_label FROM django_content_type").fetchall()
    return {label for (label,) in rows}


@pytest.mark.slow
def test_an_install_from_before_the_split_migrates_with_nothing_lost(
    pre_layers_database: str,
) -> None:
    url = pre_layers_database
    shape_before, counts_before = catalog(url)
    assert "deskcomm" in content_type_labels(url)

    split = run(url, "migrate", *SPLIT, "--noinput")
    assert split.returncode == 0, split.stderr

    shape_after, counts_after = catalog(url)
    assert shape_after == shape_before  # not a table, column, index, trigger or policy changed
    migrations = counts_after.pop("django_migrations") - counts_before.pop("django_migrations")
    # core 0001-0008 (recorded as replacing the deskcomm app's), 0009-0010, crm, jobs and lgpd.
    assert migrations == 13
    for mirror in MIRRORS:  # rebuilt from the code's registry by every migrate
        counts_before.pop(mirror), counts_after.pop(mirror)
    for table in SCHEDULES:  # every migrate installs the schedules of jobs added since: more
        assert counts_after.pop(table) >= counts_before.pop(table)
    assert counts_after == counts_before  # not a row added or lost
    assert content_type_labels(url) >= {"core", "crm", "jobs"}
    assert "deskcomm" not in content_type_labels(url)  # relabelled, so permissions follow

    # Then the migrations written since the split, as an upgrade from that main runs them.
    migrate = run(url, "migrate", "--noinput")
    assert migrate.returncode == 0, migrate.stderr

    read = run(url, "shell", "-c", CHECK_SCRIPT)
    assert read.returncode == 0, read.stderr
    found = json.loads(read.stdout.strip().splitlines()[-1])
    assert found["cpf"] == "123.456.789-09"
    assert found["lead_stage"] == "qualified"
    assert found["order"] == ["1001", "confirmed"]
    assert found["request_contact"] == found["contact"]
    assert (found["api_keys"], found["subscriptions"], found["audit"]) == (1, 1, 1)
    assert found["job_runs"] >= 1
    assert {"order.confirmed", "lead.stage_changed"} <= set(found["events"])
    assert found["perms"] == ["crm.change_order", "crm.view_contact"]

    for check in (["migrate", "--check"], ["makemigrations", "--check", "--dry-run"]):
        result = run(url, *check)
        assert result.returncode == 0, result.stdout + result.stderr
