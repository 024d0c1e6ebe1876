"""Row-level security, the second tenant wall (core.rls, migration deskcomm 0008).

A view that forgets its organization filter still shows only the key's tenant; a session that
set neither a tenant nor the bypass sees and writes nothing; platform processes (a real
`drain_events`) still work on every tenant. These need a role RLS applies to (not a superuser):
`python3 -m dev test` connects as one.
"""

from __future__ import annotations

import select
import subprocess
import sys
from typing import Any

import psycopg
import pytest
from django.db import (
    IntegrityError,
    OperationalError,
    ProgrammingError,
    connection,
    transaction,
)
from django.test import Client
from django.urls import include, path
from rest_framework.response import Response

import eventbus
from core import db_roles, rls
from core.api.views import ApiView
from core.models import Organization
from crm.models import Contact
from eventbus.store.models import EventLog
from tests.support.admin import staff
from tests.support.api import api_client, client_for, issue_key
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.db import database_url
from tests.support.processes import REPO, start_drain, subprocess_env
from tests.support.roles import deployed_env, login, web_process
from tests.support.wire import traced

pytestmark = pytest.mark.django_db


class UnfilteredEvents(ApiView):
    """Deliberately wrong: every event and contact, with no organization filter."""

    required_scopes = {"GET": "events:read"}

    def get(self, request: Any) -> Response:
        return Response(
            {
                "events": [str(pk) for pk in EventLog.objects.values_list("pk", flat=True)],
                "contacts": [str(pk) for pk in Contact.objects.values_list("pk", flat=True)],
            }
        )


urlpatterns = [
    path("api/v1/unfiltered", UnfilteredEvents.as_view()),
    path("", include("deskcomm.urls")),
]


def seed(org: Organization) -> tuple[str, str]:
    event = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    contact = Contact.objects.create(organization=org, name=f"customer of {org.slug}")
    return str(event.id), str(contact.pk)


@pytest.mark.urls(__name__)
def test_an_unfiltered_view_shows_nothing_of_another_tenant(
    enforced: None, org: Organization, org_b: Organization
) -> None:
    a_event, a_contact = seed(org)
    b_event, b_contact = seed(org_b)
    # The view really is unfiltered: this platform (bypassing) process sees both tenants.
    assert {a_event, b_event} <= {str(pk) for pk in EventLog.objects.values_list("pk", flat=True)}
    seen = api_client(org, "events:read").get("/api/v1/unfiltered").json()
    assert seen == {"events": [a_event], "contacts": [a_contact]}
    seen_b = api_client(org_b, "events:read").get("/api/v1/unfiltered").json()
    assert seen_b == {"events": [b_event], "contacts": [b_contact]}
    # The request's scope ended with it: the platform session sees everything again.
    assert EventLog.objects.count() == 2


def test_a_session_with_neither_tenant_nor_bypass_sees_and_writes_nothing(
    enforced: None, org: Organization
) -> None:
    seed(org)
    with rls.scoped():
        assert EventLog.objects.count() == 0 and Contact.objects.count() == 0
        with pytest.raises((ProgrammingError, IntegrityError)), transaction.atomic():
            Contact.objects.create(organization=org, name="smuggled")  # fails its WITH CHECK
    with rls.scoped(organization_id=org.pk):
        assert EventLog.objects.count() == 1
    assert Contact.objects.count() == 1


def test_every_tenant_table_has_the_wall() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, "
            "       EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid "
            "                AND p.polname = 'tenant_wall') "
            "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            " WHERE n.nspname = 'public' AND c.relkind = 'r' AND (c.relname = "
            "       'eventbus_deliveryattempt' OR EXISTS (SELECT 1 FROM pg_attribute a "
            "       WHERE a.attrelid = c.oid AND a.attname = 'organization_id'))"
        )
        rows = cursor.fetchall()
    assert len(rows) >= 16
    assert [name for name, *flags in rows if flags != [True, True, True]] == []


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize("as_deployed", [False, True], ids=["owner", "worker-role"])
def test_a_worker_drains_every_tenant(
    enforced: None, org: Organization, org_b: Organization, side_effects: None, as_deployed: bool
) -> None:
    seed(org)
    seed(org_b)
    args = [arg for name in EFFECT_CONSUMERS for arg in ("--consumer", name)]
    # Nothing inherited from this (bypassing) test process: the command selects the bypass; as
    # deployed it connects as deskcomm_worker (rows and the bypass by its role).
    env = deployed_env(db_roles.WORKER) if as_deployed else {"PGOPTIONS": "", rls.PROCESS_ENV: ""}
    drain = start_drain("--once", "--no-listen", *args, **env)
    try:
        assert drain.wait(timeout=120) == 0, drain.output()
        assert set(EventLog.objects.values_list("status", flat=True)) == {"done"}, drain.output()
    finally:
        drain.close()
    assert EventLog.objects.count() == 2


@pytest.mark.parametrize("role", [db_roles.WORKER, db_roles.WEB])
def test_the_deployed_roles_pass_the_database_checks(role: str) -> None:
    """`manage.py check --database ...` as each service runs: no E040/W040 (a web process
    checks its platform alias too)."""
    databases = ["default"] + ([db_roles.PLATFORM_ALIAS] if role == db_roles.WEB else [])
    args = [f"--database={alias}" for alias in databases]
    checked = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "check", *args, "--fail-level", "WARNING"],
        env=subprocess_env(**deployed_env(role)),
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "deskcomm.E040" not in checked.stderr and "deskcomm.W040" not in checked.stderr


@pytest.mark.parametrize(
    ("argv", "bypass"),
    [
        (["manage.py", "drain_events"], True),
        (["manage.py", "deliver_webhooks"], True),
        (["manage.py", "rundramatiq"], True),
        (["manage.py", "run_scheduler"], True),
        (["manage.py", "migrate"], True),
        (["/venv/bin/django-admin", "backup"], True),
        (["manage.py", "runserver"], False),
        (["/venv/bin/gunicorn", "deskcomm.wsgi"], False),
        (["-m", "dramatiq", "django_dramatiq.setup"], False),  # bypasses through the env below
    ],
)
def test_which_processes_bypass(argv: list[str], bypass: bool) -> None:
    assert rls.wants_bypass(argv, {}) is bypass
    assert rls.wants_bypass(argv, {rls.PROCESS_ENV: "true"}) is True


def session_scope() -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('app.organization_id', true),"
            " current_setting('app.rls_bypass', true)"
        )
        row = cursor.fetchone()
    return row[0] or "", row[1] or ""


@pytest.mark.django_db(transaction=True)  # an idle session: no test transaction around it
def test_an_idle_session_is_reset_by_one_plain_query(org: Organization) -> None:
    rls.set_scope(organization_id=org.pk)
    assert session_scope() == (str(org.pk), "off")
    with traced() as wire:
        rls.reset_scope()
    assert wire.round_trips == 1
    [message] = [m.split("\t", 1)[0] for m in wire.messages if not m.startswith("Sync")]
    assert message == "Query"  # no Parse/Bind/Execute: no cursor, nothing prepared
    assert session_scope() == ("", "on")  # this test process bypasses: its default
    with traced() as wire:
        rls.reset_scope()  # nothing scoped it since: nothing sent
    assert wire.messages == []


def test_inside_a_transaction_the_reset_is_one_of_its_statements(org: Organization) -> None:
    # pytest-django's test transaction is open: the reset joins it, so it is rolled back with it
    # as every other statement there (never a reset that silently escapes the transaction).
    rls.set_scope(organization_id=org.pk)
    with traced() as wire:
        rls.reset_scope()
    assert [m.split("\t", 1)[0] for m in wire.messages if m.startswith(("Query", "Parse"))]
    assert session_scope() == ("", "on")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("known_bad", [False, True], ids=["found-by-the-reset", "known-before"])
def test_a_session_whose_reset_fails_is_closed_not_reused(
    org: Organization, known_bad: bool
) -> None:
    rls.set_scope(organization_id=org.pk)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with psycopg.connect(database_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    socket = connection.connection.pgconn.socket
    assert select.select([socket], [], [], 10)[0], "the server never ended the session"
    if known_bad:  # libpq noticed already: nothing to reset, the session is just closed
        connection.connection.pgconn.exec_(b"SELECT 1")
        rls.reset_scope()
    else:
        with pytest.raises(OperationalError, match="resetting the session's tenant scope failed"):
            rls.reset_scope()
    assert connection.connection is None  # closed: the next request opens a fresh session
    assert session_scope() == ("", "on")


# -- A web process whose role cannot bypass (core.db_roles): the platform alias --------------


class Escalating(ApiView):
    """Deliberately wrong: an API view asking for the bypass."""

    required_scopes = {"GET": "events:read"}

    def get(self, request: Any) -> Response:
        rls.set_scope(bypass=True)
        return Response({"contacts": Contact.objects.count()})


urlpatterns.insert(0, path("api/v1/escalating", Escalating.as_view()))


@pytest.mark.django_db(transaction=True)
def test_a_web_process_bypasses_only_through_the_platform_connection(
    enforced: None, org: Organization, org_b: Organization, django_db_blocker: Any
) -> None:
    seed(org)
    seed(org_b)
    with web_process(django_db_blocker):
        assert Contact.objects.count() == 0  # closed: the web role's own session
        with connection.cursor() as cursor:
            cursor.execute("SET app.rls_bypass = on")  # the setting is not the web role's
        assert Contact.objects.count() == 0
        rls.set_scope(bypass=True)  # the ORM and raw SQL: both on the platform connection
        assert rls.on_platform() and Contact.objects.count() == 2
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user, count(*) FROM deskcomm_contact")
            assert cursor.fetchone() == (login(db_roles.WORKER)[0], 2)
        rls.set_scope(organization_id=org.pk)  # back on the web one, proven by the platform
        assert not rls.on_platform()
        assert list(Contact.objects.values_list("organization_id", flat=True)) == [org.pk]
        rls.reset_scope()
        assert Contact.objects.count() == 0
        with rls.scoped(bypass=True):
            assert EventLog.objects.count() == 2
        assert not rls.on_platform() and EventLog.objects.count() == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.urls(__name__)
def test_in_a_web_process_the_staff_admin_sees_every_tenant_and_the_api_only_its_own(
    enforced: None, org: Organization, org_b: Organization, django_db_blocker: Any
) -> None:
    a_event, a_contact = seed(org)
    b_event, b_contact = seed(org_b)
    user = staff("ops", "crm.view_contact")
    a_token, b_token = issue_key(org, "events:read"), issue_key(org_b, "events:read")
    with web_process(django_db_blocker):
        browser = Client()
        browser.force_login(user)
        page = browser.get("/admin/crm/contact/")
        assert page.status_code == 200
        assert b"customer of acme" in page.content and b"customer of beta" in page.content
        assert not rls.on_platform()  # the request is over: back on the web connection
        seen = client_for(a_token).get("/api/v1/unfiltered").json()
        assert seen == {"events": [a_event], "contacts": [a_contact]}
        seen_b = client_for(b_token).get("/api/v1/unfiltered").json()
        assert seen_b == {"events": [b_event], "contacts": [b_contact]}
        # An API view asking for the bypass fails (PermissionError, a 500), never escalates.
        assert client_for(a_token).get("/api/v1/escalating").status_code == 500
        assert not rls.on_platform()


@pytest.mark.django_db(transaction=True)
def test_in_a_web_process_an_api_key_emits_into_its_own_tenant(
    enforced: None, org: Organization, django_db_blocker: Any
) -> None:
    token = issue_key(org, "events:write")
    with web_process(django_db_blocker):
        body = {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 1}}
        response = client_for(token).post("/api/v1/events", body, format="json")
        assert response.status_code == 201, response.content
    event = EventLog.objects.get(pk=response.json()["id"])
    assert event.organization_id == org.pk
