"""Which reads the replica serves: the views marked for it, never a write or a transaction, not
an operator who just acted; with the request's tenant scope on the replica's session too."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connections, router, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

import eventbus
from core import rls
from core.models import Organization
from core.replica.conf import ALIAS, PRIMARY
from core.replica.routing import PIN_COOKIE, replica_reads
from eventbus.store.models import EventLog
from tests.support.api import api_client
from tests.support.factories import OrganizationFactory
from tests.support.streaming import StreamingPair

# The pair's servers, not the test database, hold these tests' rows; the marker is what makes
# pytest-django create the test database the pair is copied from.
pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = "/api/v1/events"


def emit_one(organization: Organization) -> uuid.UUID:
    event = eventbus.emit(
        "test.effect", organization=organization, entity_kind="thing", payload={"n": 1}
    )
    return event.id


def listed(response: Any) -> set[str]:
    assert response.status_code == 200, response.content[:500]
    return {item["id"] for item in response.json()["results"]}


def test_the_api_list_reads_the_replica_and_the_detail_the_primary(
    replicated: StreamingPair,
) -> None:
    org = OrganizationFactory()
    client = api_client(org, "events:read")
    old = emit_one(org)
    replicated.wait_caught_up()
    replicated.pause_replay()
    new = emit_one(org)  # on the primary only: the standby applies nothing now

    with CaptureQueriesContext(connections[ALIAS]) as on_replica:
        seen = listed(client.get(EVENTS))
    assert seen == {str(old)}  # the replica's view of the organization
    assert any("event_log" in query["sql"] for query in on_replica.captured_queries)
    # The detail endpoint is not marked: the primary, which has the new event.
    assert client.get(f"{EVENTS}/{new}").status_code == 200
    replicated.resume_replay()
    assert listed(client.get(EVENTS)) == {str(old), str(new)}


def operator() -> Client:
    client = Client()
    name = f"operator-{uuid.uuid4().hex[:8]}"
    client.force_login(get_user_model().objects.create_superuser(name, f"{name}@example.com"))
    return client


def browsed(client: Client, event_id: uuid.UUID) -> bool:
    """Whether the event browser (first page) lists the event."""
    response = client.get("/admin/eventbus/eventlog/")
    assert response.status_code == 200
    return str(event_id) in response.content.decode()


def test_the_event_browser_reads_the_replica_until_the_operator_acts(
    replicated: StreamingPair,
) -> None:
    org = OrganizationFactory()
    acting, watching = operator(), operator()
    replicated.wait_caught_up()  # the operators' accounts and sessions are on the standby too
    replicated.pause_replay()
    new = emit_one(org)
    assert not browsed(acting, new) and not browsed(watching, new)  # the replica's page

    reason = f"replica test {uuid.uuid4()}"
    paused = acting.post("/admin/ops/consumers/effect-a-worker/pause/", {"reason": reason})
    assert paused.status_code == 302 and PIN_COOKIE in paused.cookies
    # Read-your-writes: the operator who acted reads the primary, and sees the pause...
    assert reason in acting.get("/admin/ops/consumers/").content.decode()
    assert browsed(acting, new)
    # ...which the other operator, still on the paused replica, does not see yet.
    assert reason not in watching.get("/admin/ops/consumers/").content.decode()
    assert not browsed(watching, new)
    # After the window the acting operator is back on the replica.
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=20)):
        assert not browsed(acting, new)
    acting.post("/admin/ops/consumers/effect-a-worker/resume/", {"reason": reason})


def test_a_read_is_not_pinned_by_reading(replicated: StreamingPair) -> None:
    response = operator().get("/admin/eventbus/eventlog/")
    assert response.status_code == 200 and PIN_COOKIE not in response.cookies


def test_the_status_page_reads_the_replica(replicated: StreamingPair) -> None:
    with CaptureQueriesContext(connections[ALIAS]) as on_replica:
        response = operator().get("/admin/ops/status/")
    assert response.status_code == 200
    assert any("eventbus_delivery" in query["sql"] for query in on_replica.captured_queries)


def test_writes_transactions_and_unmarked_code_use_the_primary(replicated: StreamingPair) -> None:
    org = OrganizationFactory()
    replicated.wait_caught_up()
    replicated.pause_replay()
    new = emit_one(org)
    assert EventLog.objects.filter(pk=new).exists()  # no view marked this: the primary
    with replica_reads() as allowed:
        assert allowed
        assert not EventLog.objects.filter(pk=new).exists()  # the standby
        with transaction.atomic():
            assert EventLog.objects.filter(pk=new).exists()  # a read that may feed a write
        assert router.db_for_write(EventLog) == PRIMARY
    assert router.allow_migrate(PRIMARY, "eventbus") and not router.allow_migrate(ALIAS, "eventbus")


def test_the_replica_session_takes_the_request_tenant(replicated: StreamingPair) -> None:
    own, other = OrganizationFactory(), OrganizationFactory()
    both = [emit_one(own), emit_one(other)]
    replicated.wait_caught_up()

    def visible() -> set[uuid.UUID]:
        with CaptureQueriesContext(connections[ALIAS]) as on_replica:
            found = set(EventLog.objects.filter(pk__in=both).values_list("pk", flat=True))
        assert any("event_log" in query["sql"] for query in on_replica.captured_queries)
        return found

    with replica_reads():
        with rls.scoped(organization_id=own.id):  # as an API key scopes the primary's session
            assert visible() == {both[0]}  # row-level security holds on the replica
        with rls.scoped(bypass=True):  # the platform admin's bypass follows too
            assert visible() == set(both)
