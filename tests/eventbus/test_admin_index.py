"""The admin index opens on numbers (ready, waiting to retry, dead, the last hour's events,
workers alive: one capped statement, scoped like every admin read) and its "Recent actions"
shows the audit log, where pauses, reprocesses, discards and job runs are recorded."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import eventbus
from core import audit
from core.models import Organization, WorkerProcess
from eventbus.store.models import Delivery
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import make_dead

pytestmark = pytest.mark.django_db

STAT = re.compile(r'<b><a href="([^"]*)">([^<]*)</a></b><span>([^<]*)</span>')
WATCHER = (
    "eventbus.view_delivery",
    "eventbus.view_deadletter",
    "eventbus.view_eventlog",
    "core.view_workerprocess",
)


def counts(client: Client) -> dict[str, str]:
    """{label: number shown} of the index's counts."""
    html = client.get("/admin/").content.decode()
    box = html[html.index('id="ops-counts"') :]
    return {label: shown for _, shown, label in STAT.findall(box[: box.index("</div>\n</div>")])}


def logged_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def bus_traffic(org: Organization) -> None:
    """3 events: 9 deliveries due now, 2 of them then waiting for a retry; 2 dead letters
    (2 more events); one worker alive, one stale, one stopped."""
    for n in range(3):
        eventbus.emit("test.effect", organization=org, entity_kind="thing", payload={"n": n})
    waiting = Delivery.objects.filter(status="pending").order_by("id")[:2]
    Delivery.objects.filter(pk__in=[d.pk for d in waiting]).update(
        attempts=1, next_attempt_at=timezone.now() + dt.timedelta(minutes=5)
    )
    make_dead(org, 2)
    now = timezone.now()
    for n, (beat, stopped) in enumerate(
        [(now, None), (now - dt.timedelta(minutes=5), None), (now, now)]
    ):
        WorkerProcess.objects.create(
            id=f"host:{n}",
            kind="drain_events",
            host="host",
            pid=n,
            started_at=now,
            heartbeat_at=beat,
            stopped_at=stopped,
        )


def test_the_index_opens_on_the_bus_counts_linking_their_pages(org: Organization) -> None:
    bus_traffic(org)
    client = logged_in(staff("watcher", *WATCHER))
    assert counts(client) == {
        "ready to run": "7",
        "waiting to retry": "2",
        "dead letters": "2",
        "events, last hour": "5",
        "workers alive": "1",
    }
    html = client.get("/admin/").content.decode()
    assert '<a href="/admin/eventbus/deadletter/">2</a>' in html
    assert '<a href="/admin/ops/workers/">1</a>' in html


def test_each_count_needs_the_permission_of_its_page(org: Organization) -> None:
    bus_traffic(org)
    assert counts(logged_in(staff("dlq", *DLQ_OPERATOR))) == {"dead letters": "2"}
    client = logged_in(staff("nobody", "core.view_organization"))
    with CaptureQueriesContext(connection) as queries:
        assert 'id="ops-counts"' not in client.get("/admin/").content.decode()
    assert not [q for q in queries.captured_queries if "index_counts" in q["sql"]]


def test_organization_scoped_staff_count_their_organization_only(
    org: Organization, org_b: Organization
) -> None:
    bus_traffic(org)
    make_dead(org_b, 3)
    eventbus.emit("test.effect", organization=org_b, entity_kind="thing", payload={"n": 9})
    scoped = logged_in(staff("acme-ops", *WATCHER, organizations=[org]))
    # Workers are platform-wide: not an organization's staff's to see.
    assert counts(scoped) == {
        "ready to run": "7",
        "waiting to retry": "2",
        "dead letters": "2",
        "events, last hour": "5",
    }
    unbound = logged_in(staff("nowhere", *WATCHER, organizations=[]))
    assert counts(unbound) == {
        "ready to run": "0",
        "waiting to retry": "0",
        "dead letters": "0",
        "events, last hour": "0",
    }


def test_the_counts_are_one_statement_and_the_index_keeps_its_query_budget(
    org: Organization,
) -> None:
    bus_traffic(org)
    client = logged_in(User.objects.create_superuser("ops", password="pw-not-used"))
    client.get("/admin/")  # the session, the permissions' cache
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/admin/").status_code == 200
    statements = [q["sql"] for q in queries.captured_queries]
    assert sum("-- name: index_counts" in sql for sql in statements) == 1
    assert sum("deskcomm_auditlog" in sql for sql in statements) == 1  # the recent actions
    # session, user, the scope (set and reset), the counts, the recent actions
    assert len(statements) <= 6, [s[:90] for s in statements]


def test_recent_actions_show_the_audit_log_pauses_and_reprocesses_included(
    org: Organization,
) -> None:
    (dead,) = make_dead(org, 1)
    maria = logged_in(User.objects.create_superuser("maria", password="pw-not-used"))
    maria.post("/admin/ops/consumers/effect-a-worker/pause/", {"reason": "the CRM API is down"})
    maria.post(
        "/admin/eventbus/deadletter/",
        {"action": "reprocess_selected", "index": "0", "_selected_action": [dead.pk]},
    )
    html = maria.get("/admin/").content.decode()
    box = html[html.index('id="recent-actions-module"') :]
    assert "None available" not in box
    assert "consumer.pause" in box and "the CRM API is down" in box
    assert "delivery.reprocess" in box and f"delivery {dead.pk}" in box
    assert "user:maria" in box
    assert 'href="/admin/core/auditlog/"' in box


def test_without_the_audit_log_a_user_sees_only_their_own_actions(org: Organization) -> None:
    audit.record(actor="user:someone-else", action="delivery.discard", target_type="x", target_id=1)
    pauser = staff("pauser", "eventbus.pause_consumer", "eventbus.view_consumerstate")
    client = logged_in(pauser)
    client.post("/admin/ops/consumers/effect-b-worker/pause/", {"reason": "maintenance"})
    box = client.get("/admin/").content.decode().split('id="recent-actions-module"')[1]
    assert "consumer.pause" in box and "user:pauser" in box
    assert "delivery.discard" not in box
    assert 'href="/admin/core/auditlog/"' not in box


def test_organization_scoped_staff_see_their_organizations_entries(
    org: Organization, org_b: Organization
) -> None:
    for organization in (org, org_b):
        audit.record(
            actor="user:ops",
            action=f"delivery.reprocess.{organization.slug}",
            target_type="eventbus.delivery",
            target_id=1,
            organization_id=organization.pk,
        )
    client = logged_in(staff("acme-auditor", "core.view_auditlog", organizations=[org]))
    box = client.get("/admin/").content.decode().split('id="recent-actions-module"')[1]
    assert f"delivery.reprocess.{org.slug}" in box
    assert f"delivery.reprocess.{org_b.slug}" not in box
