"""Through a real PgBouncer in transaction pooling mode (core.pooler): the API (emit and lists,
scoped per tenant), a `drain_events` woken by LISTEN on the direct server, the scheduler's leader
lock and the jobs process, the admin (login, every tenant's events, the status page), and no
tenant scope or bypass left on a pooled server session; the pooler's system checks."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.urls import reverse

import eventbus
from core import pooler_checks
from core.db_roles import WEB, WORKER
from core.models import Organization
from jobs.models import JobRun
from tests.support.api import issue_key
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.db import (
    database_url,
    listening_backends,
    role_bypasses_rls,
    side_effect_rows,
)
from tests.support.pgbouncer import PgBouncer, free_port, running_pgbouncer
from tests.support.processes import Drain, Managed, start_drain, start_jobs
from tests.support.roles import login as role_login
from tests.support.schedules import every_second
from tests.support.waiting import wait_for

EVENTS = "/api/v1/events"
EFFECT_ARGS = [arg for name in EFFECT_CONSUMERS for arg in ("--consumer", name)]
POOL_SIZE = 2
# Far longer than the test waits: an event handled within it was a LISTEN wake-up.
POLL_SECONDS = "120"
PROBE_SQL = (
    "SELECT coalesce(current_setting('app.organization_id', true), ''),"
    " coalesce(current_setting('app.rls_bypass', true), ''), count(*) FROM event_log"
)


@pytest.fixture
def bouncer() -> Iterator[PgBouncer]:
    with running_pgbouncer(pool_size=POOL_SIZE) as running:
        yield running


@pytest.fixture
def no_schedules(django_db_blocker: Any) -> Iterator[None]:
    """Only the schedule the test creates (migrate installs the defaults), no queued jobs."""

    def clean() -> None:
        with django_db_blocker.unblock(), connection.cursor() as cursor:
            cursor.execute("DELETE FROM dramatiq.queue WHERE queue_name = 'jobs'")
            cursor.execute("DELETE FROM django_celery_beat_periodictask")

    clean()
    yield
    clean()


def pooled_env(bouncer: PgBouncer, **extra: str) -> dict[str, str]:
    """A process whose Django connections go through PgBouncer, sessions to the server."""
    return {
        "DATABASE_URL": bouncer.url(str(connection.settings_dict["NAME"])),
        "DATABASE_POOLER": "transaction",
        "DATABASE_DIRECT_URL": database_url(),
        **extra,
    }


def start_web(bouncer: PgBouncer, port: int) -> Managed:
    """A web process (`runserver`: fails closed, scopes each request), not bypassing RLS the way
    this test process does (tests/conftest.py), as deployed: connected as the web role, with
    its platform work as the worker role, both through the pooler (core.db_roles)."""
    dbname = str(connection.settings_dict["NAME"])
    s = connection.settings_dict
    env = pooled_env(
        bouncer,
        DEBUG="true",  # runserver is a development server (and needs no production keys)
        DB_RLS_BYPASS="false",
        PGOPTIONS="",
        EVENTBUS_NOTIFY_EVENT_TYPES="test.effect",
        DATABASE_ROLE="web",
        DATABASE_WEB_URL=bouncer.url(dbname, user=role_login(WEB)[0]),
        DATABASE_WORKER_URL=bouncer.url(dbname, user=role_login(WORKER)[0]),
        # The server itself, with no user: each connection keeps its own role.
        DATABASE_DIRECT_URL=f"postgres://{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/",
    )
    return Managed("runserver", f"127.0.0.1:{port}", "--noreload", **env)


def answering(web: Managed, base_url: str) -> bool:
    assert web.poll() is None, web.output()
    try:
        httpx.get(f"{base_url}/api/v1/health", timeout=2)
    except httpx.TransportError:
        return False
    return True


def completed_runs() -> int:
    return JobRun.objects.filter(job="dlq-alert", trigger="schedule", status="completed").count()


def post_events(client: httpx.Client, token: str, n: int) -> list[str]:
    ids = []
    for i in range(n):
        body = {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}}
        response = client.post(EVENTS, json=body, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def listed(client: httpx.Client, token: str) -> set[str]:
    response = client.get(EVENTS, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["results"]}


def probe_every_server_session(bouncer: PgBouncer, user: str = "") -> list[tuple[str, str, int]]:
    """What a client with no scope sees on each pooled server session (of `user`'s pool, the
    test role's by default): as many transactions held open at once as the pool has sessions,
    so each runs on a different one."""
    dbname = str(connection.settings_dict["NAME"])
    url = bouncer.url(dbname, user=user)
    probes = [psycopg.connect(url, options="") for _ in range(POOL_SIZE)]
    try:
        return [tuple(probe.execute(PROBE_SQL).fetchone()) for probe in probes]  # type: ignore[misc]
    finally:
        for probe in probes:
            probe.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_api_drain_scheduler_and_jobs_work_through_pgbouncer_in_transaction_mode(
    bouncer: PgBouncer,
    org: Organization,
    org_b: Organization,
    side_effects: None,
    no_schedules: None,
    processes: list[Drain],
    managed: list[Managed],
) -> None:
    if role_bypasses_rls():
        pytest.skip("the test role skips row-level security: the tenant scope is not tested")
    tokens = {org.pk: issue_key(org), org_b.pk: issue_key(org_b)}
    every_second()
    port = free_port()
    web = start_web(bouncer, port)
    scheduler = Managed("run_scheduler", "--max-interval", "0.5", **pooled_env(bouncer))
    jobs = start_jobs(**pooled_env(bouncer))
    managed.extend([web, scheduler, jobs])
    drain = start_drain("--poll-interval", POLL_SECONDS, *EFFECT_ARGS, **pooled_env(bouncer))
    processes.append(drain)
    base_url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answering(web, base_url), timeout=60, what=web.output)
    wait_for(lambda: listening_backends() == 1, timeout=60, what=drain.output)

    with httpx.Client(base_url=base_url, timeout=30) as client:
        emitted = {pk: set(post_events(client, token, 4)) for pk, token in tokens.items()}
        # Emitted through the API (tenant from the key, RLS checks the insert), delivered by the
        # drain long before its poll: woken by NOTIFY on its LISTEN connection to the server.
        expected = 8 * len(EFFECT_CONSUMERS)
        wait_for(lambda: len(side_effect_rows()) == expected, timeout=30, what=drain.output)
        assert {runs for _, _, runs in side_effect_rows()} == {1}
        # Requests of two tenants on the same few server sessions: each sees its own events.
        for _ in range(3):
            assert {pk: listed(client, token) for pk, token in tokens.items()} == emitted

    # No server session kept a tenant's scope (or the bypass) for the next client, in the
    # pools of the test role and of the web process's two roles (PgBouncer pools per user).
    for user in ("", role_login(WEB)[0], role_login(WORKER)[0]):
        assert probe_every_server_session(bouncer, user) == [("", "", 0)] * POOL_SIZE, user
    # The scheduler (leader lock on the direct server) fired the job, the jobs process ran it.
    wait_for(
        lambda: completed_runs() >= 2,
        timeout=60,
        what=lambda: f"{scheduler.output()}\n{jobs.output()}",
    )
    assert "is now the leader" in scheduler.output()
    servers = bouncer.show("SERVERS")
    per_user = {
        user: sum(1 for s in servers if s["user"] == user) for user in {s["user"] for s in servers}
    }
    assert max(per_user.values(), default=0) <= POOL_SIZE, per_user
    assert len(bouncer.show("CLIENTS")) > len(servers)  # the pools really were shared
    assert drain.poll() is None, drain.output()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_admin_works_through_pgbouncer_and_leaves_no_bypass_behind(
    bouncer: PgBouncer, org: Organization, org_b: Organization, managed: list[Managed]
) -> None:
    if role_bypasses_rls():
        pytest.skip("the test role skips row-level security: the bypass is not tested")
    events = [
        eventbus.emit("test.effect", organization=tenant, entity_kind="thing", payload={"n": 1})
        for tenant in (org, org_b)
    ]
    password = secrets.token_urlsafe(16)
    get_user_model().objects.create_superuser("ops", "ops@example.com", password)
    port = free_port()
    web = start_web(bouncer, port)
    managed.append(web)
    base_url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answering(web, base_url), timeout=60, what=web.output)

    login = reverse("admin:login")
    with httpx.Client(base_url=base_url, timeout=30) as client:
        assert client.get(login).status_code == 200  # sets the CSRF cookie
        form = {"username": "ops", "password": password, "next": reverse("admin:index")}
        form["csrfmiddlewaretoken"] = client.cookies["csrftoken"]
        signed_in = client.post(login, data=form, headers={"Referer": base_url + login})
        assert signed_in.status_code == 302, signed_in.text  # the session row went through
        # The platform admin's bypass, set per transaction on pooled sessions: both tenants.
        page = client.get(reverse("admin:eventbus_eventlog_changelist"))
        assert page.status_code == 200, page.text
        for event in events:
            assert reverse("admin:eventbus_eventlog_change", args=[event.pk]) in page.text
        assert client.get(reverse("eventbus_ops:status")).status_code == 200

    # No server session kept the admin's bypass for the next client (the admin's statements
    # ran as the worker role: the web process's platform connection).
    for user in ("", role_login(WEB)[0], role_login(WORKER)[0]):
        assert probe_every_server_session(bouncer, user) == [("", "", 0)] * POOL_SIZE, user
    assert web.poll() is None, web.output()


@pytest.mark.parametrize(
    ("pooler", "direct", "port", "expected"),
    [
        ("transaction", "", "5432", ["deskcomm.E101"]),
        ("statement", "postgres://u@db:5432/", "5432", ["deskcomm.E102"]),
        ("", "", "6432", ["deskcomm.W101"]),
        ("transaction", "postgres://u@db:5432/", "6432", []),
        ("", "", "5432", []),
    ],
)
def test_the_pooler_check_explains_misconfiguration(
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    pooler: str,
    direct: str,
    port: str,
    expected: list[str],
) -> None:
    monkeypatch.setitem(settings.DATABASES["default"], "PORT", port)
    with override_settings(DATABASE_POOLER=pooler, DATABASE_DIRECT_URL=direct):
        found = pooler_checks.check_pooler_settings()
    assert [message.id for message in found] == expected
    assert all("DATABASE_POOLER=transaction" in (message.hint or "") for message in found)


@pytest.mark.django_db(transaction=True)
def test_a_pooler_the_settings_do_not_know_about_is_named_by_the_database_check(
    bouncer: PgBouncer, managed: list[Managed]
) -> None:
    """Without DATABASE_POOLER the connection carries startup options, which PgBouncer refuses."""
    env = {"DATABASE_URL": bouncer.url(str(connection.settings_dict["NAME"]))}
    check = Managed("check", "--database", "default", **env)
    managed.append(check)
    check.wait(timeout=120)
    assert "deskcomm.E103" in check.output()
    assert "DATABASE_POOLER" in check.output()


@pytest.mark.django_db(transaction=True)
def test_session_commands_run_on_the_direct_server(managed: list[Managed]) -> None:
    """`migrate` needs a whole session: with the pooler configured it connects to
    DATABASE_DIRECT_URL, so it works even with nothing listening at DATABASE_URL."""
    nowhere = f"postgres://{connection.settings_dict['USER']}@127.0.0.1:{free_port()}"
    env = {
        "DATABASE_URL": f"{nowhere}/{connection.settings_dict['NAME']}",
        "DATABASE_POOLER": "transaction",
        "DATABASE_DIRECT_URL": database_url(),
    }
    migrate = Managed("migrate", "--check", **env)
    shell = Managed(
        "shell", "-c", "from core.models import Organization; Organization.objects.count()", **env
    )
    managed.extend([migrate, shell])
    assert migrate.wait(timeout=120) == 0, migrate.output()
    assert shell.wait(timeout=120) != 0  # any other command uses DATABASE_URL: the pooler
    assert "Connection refused" in shell.output() or "connection failed" in shell.output()
