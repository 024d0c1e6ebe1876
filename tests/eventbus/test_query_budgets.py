"""Query-count budgets of the hot paths, counted at the wire (tests/support/wire.py).

Each test warms its path once (the first run of a statement on a connection also prepares it),
then counts what one more run sends to PostgreSQL: statements and requests that wait for the
server. A path that grows a statement, a round trip or a re-plan fails here, without timing.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import close_old_connections, connection, transaction

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.drain import failure
from eventbus.dispatch.settle import Settlement, by_token, settle
from eventbus.store.emitter import EMIT_MANY_STATEMENT_ROWS
from eventbus.store.models import EventLog
from tests.support.api import api_client, lead_stage_changed
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.wire import Wire, traced

pytestmark = pytest.mark.django_db


def emit_one(org: Organization, n: int = 1) -> EventLog:
    return eventbus.emit("test.effect", organization=org, entity_kind="thing", payload={"n": n})


def items(count: int) -> list[dict[str, Any]]:
    return [
        {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}}
        for i in range(count)
    ]


def test_emit_is_one_prepared_statement_in_one_round_trip(org: Organization) -> None:
    with transaction.atomic():
        emit_one(org)
        with traced() as wire:
            event = emit_one(org, 2)
    assert wire.named() == ["emit_insert_one"]
    assert wire.round_trips == 1
    assert not [m for m in wire.messages if m.startswith("Parse")]  # run from the plan cache
    assert event.fanout == len(EFFECT_CONSUMERS)


def test_emit_many_is_one_statement_per_chunk_and_one_pipeline(org: Organization) -> None:
    chunks = 3
    count = EMIT_MANY_STATEMENT_ROWS * (chunks - 1) + 1
    with transaction.atomic():
        eventbus.emit_many(items(2), organization=org)
        with traced() as wire:
            ids = eventbus.emit_many(items(count), organization=org)
    assert len(ids) == count
    named = wire.named()
    assert named.count("emit_insert_many") == chunks
    # Its savepoint (all or nothing inside the caller's transaction), the pipeline of chunks
    # (one Sync), the savepoint's release: nothing per item, nothing per chunk but a statement.
    assert len(named) == chunks + 2, named
    assert wire.round_trips == 3


def settlement_of(claimed: claims.Claim, **outcomes: Any) -> Settlement:
    settlement = by_token((claimed.token, event) for event in claimed.events)[claimed.token]
    for name, value in outcomes.items():
        setattr(settlement, name, value)
    return settlement


def test_claim_and_settle_are_one_statement_each(org: Organization) -> None:
    for n in range(3):
        emit_one(org, n)
    warm = claims.claim(consumers=list(EFFECT_CONSUMERS), batch_size=1, worker_id="w")
    settle(settlement_of(warm, done=[e.delivery_id for e in warm.events]), worker_id="w")
    with traced() as wire:
        claimed = claims.claim(consumers=list(EFFECT_CONSUMERS), batch_size=100, worker_id="w")
    assert len(claimed.events) == 3 * len(EFFECT_CONSUMERS) - 1
    assert wire.named() == ["claim"] and wire.round_trips == 1
    done = [e.delivery_id for e in claimed.events]
    with traced() as wire:
        settle(settlement_of(claimed, done=done), worker_id="w")
    assert wire.named() == ["ack"] and wire.round_trips == 1


def test_settling_failures_and_releases_adds_one_statement_each(org: Organization) -> None:
    def settle_mixed() -> Wire:
        emit_one(org)
        claimed = claims.claim(consumers=list(EFFECT_CONSUMERS), batch_size=100, worker_id="w")
        done, failed, released, *_ = claimed.events  # (a release of the last run too)
        settlement = settlement_of(
            claimed,
            done=[done.delivery_id],
            failures=[failure(failed, ConnectionError("upstream timed out"), 0.01)],
            released=[released.delivery_id],
        )
        with traced() as wire:
            settle(settlement, worker_id="w")
        return wire

    settle_mixed()  # prepares nack and release
    wire = settle_mixed()
    assert wire.named() == ["ack", "nack", "release"]
    assert wire.round_trips == 3


@pytest.mark.django_db(transaction=True)  # close_old_connections closes it inside an atomic
def test_api_emit_is_key_lookup_with_throttle_then_emit_and_the_scope_reset(
    org: Organization,
) -> None:
    client = api_client(org, "events:write")
    assert client.post("/api/v1/events", lead_stage_changed(), format="json").status_code == 201
    # What the server's request_started runs first on a reused connection (the test client
    # leaves it out): a health check is due again; the request shows it is not needed.
    close_old_connections()
    with traced() as wire:
        response = client.post("/api/v1/events", lead_stage_changed(), format="json")
    assert response.status_code == 201, response.content
    assert EventLog.objects.filter(pk=response.json()["id"]).exists()
    assert [s.split("(")[0].split("\n")[0].strip() for s in wire.statements] == [
        # the key, the session's tenant and the rate limit (shared by every process)
        "WITH k AS MATERIALIZED",
        # the event and its deliveries, with the organization's door quota
        # (EVENTBUS_DOOR_EMIT_RATE) counted in the same statement, the type being known to be
        # open to the API
        "-- emit_insert_one: one event and its deliveries, in the caller's transaction",
        "SELECT set_config",  # the session's row-level-security scope put back
    ]
    assert "deskcomm_throttlestate" in wire.statements[0]
    with connection.cursor() as cursor:  # the door's quota did count it
        cursor.execute(
            "SELECT 1 FROM deskcomm_throttlestate WHERE key = %s", [f"emit-door:{org.pk}"]
        )
        assert cursor.fetchone() is not None
    assert wire.round_trips == 3


@pytest.mark.django_db(transaction=True)  # close_old_connections closes it inside an atomic
def test_api_event_list_is_key_lookup_then_one_page_statement_and_the_scope_reset(
    org: Organization,
) -> None:
    for n in range(3):
        emit_one(org, n)
    client = api_client(org, "events:read")
    assert client.get("/api/v1/events?limit=2&entity_kind=thing").status_code == 200
    close_old_connections()  # as in the emit's budget above
    with traced() as wire:
        response = client.get("/api/v1/events?limit=2&entity_kind=thing")
    assert response.status_code == 200, response.content
    assert len(response.json()["results"]) == 2
    lookup, page, reset = wire.statements  # the page: one statement kept for its filters' shape
    assert lookup.startswith("WITH k AS MATERIALIZED")
    assert "FROM event_log e WHERE" in page and "e.entity_kind = $" in page
    assert reset.startswith("SELECT set_config")
    assert wire.round_trips == 3
