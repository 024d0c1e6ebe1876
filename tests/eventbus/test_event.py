"""The Event handed to consumers: read-only, decoded on demand, with its correlation ids."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.transaction import TransactionManagementError

import eventbus
from core import context
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.store.event import FIELDS, Event, row_loader


def make(**overrides: object) -> Event:
    fields: dict[str, object] = {
        "id": uuid.uuid4(),
        "organization_id": uuid.uuid4(),
        "event_type": "test.effect",
        "entity_kind": "thing",
        "entity_id": None,
        "payload": json.dumps({"n": 1, "text": "olá"}),
        "metadata": json.dumps({"request_id": "req-1", "trace_id": 5, "schema_version": 1}),
        "created_at": dt.datetime(2026, 11, 29, tzinfo=dt.UTC),
        "consumer": "c1",
        "delivery_id": 3,
        "attempt": 1,
        "max_attempts": 8,
    }
    return Event(**{**fields, **overrides})  # type: ignore[arg-type]


def test_json_text_is_decoded_when_read() -> None:
    event = make()
    assert event.payload == {"n": 1, "text": "olá"}
    assert event.payload is event.payload  # decoded once
    assert event.metadata["schema_version"] == 1
    assert event.correlation == {"request_id": "req-1", "trace_id": "5"}
    assert event.request_id == "req-1"
    assert make(payload={"n": 2}).payload == {"n": 2}  # dicts are taken as they are


def test_an_event_is_read_only() -> None:
    event = make()
    with pytest.raises(AttributeError, match="read-only"):
        event.consumer = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        del event.payload
    assert event == make(id=event.id, organization_id=event.organization_id)
    assert event != make()
    assert "test.effect" in repr(event) and "olá" not in repr(event)


ROW_FIELDS = (*FIELDS, "redelivery_reason")  # the event's, the delivery's, then the reason
EVENT_FIELDS = FIELDS[: FIELDS.index("created_at") + 1]
SLOTS = [*Event.__slots__]


def test_a_row_loader_builds_the_event_the_constructor_would() -> None:
    expected = make(redelivered=True, redelivery_reason="worker w1 died", entity_id=uuid.uuid4())
    values = [getattr(expected, "_" + f if f in ("payload", "metadata") else f) for f in ROW_FIELDS]
    ids = [(len(ROW_FIELDS), "request_id"), (len(ROW_FIELDS) + 1, "trace_id")]
    load = row_loader([*enumerate(ROW_FIELDS)], ids)
    built = load([*values, "req-9", None])
    assert [getattr(built, s) for s in SLOTS if s != "_correlation"] == [
        getattr(expected, s) for s in SLOTS if s != "_correlation"
    ]
    assert built.correlation == {"request_id": "req-9"}  # NULLs left out, metadata not read
    assert built == expected
    with pytest.raises(AttributeError, match="read-only"):
        built.attempt = 2  # type: ignore[misc]


def test_a_row_loader_defaults_the_delivery_fields_and_needs_the_event_ones() -> None:
    event_fields = EVENT_FIELDS
    source = make()
    values = [getattr(source, "_" + f if f in ("payload", "metadata") else f) for f in event_fields]
    built = row_loader([*enumerate(event_fields)], [])(values)
    assert (built.consumer, built.delivery_id, built.attempt, built.max_attempts) == ("", 0, 0, 0)
    assert (built.redelivered, built.redelivery_reason, built.correlation) == (False, None, {})
    with pytest.raises(TypeError, match="created_at"):
        row_loader([*enumerate(event_fields[:-1])], [])


@pytest.mark.django_db
def test_the_claim_reads_correlation_ids_without_the_metadata(org: Organization) -> None:
    with context.bind(request_id="req-claim", actor_id="api_key:ab12"):
        emitted = eventbus.emit(
            "test.effect", organization=org, entity_kind="thing", payload={"n": 4}
        )
    claimed = claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="w")
    (event,) = claimed.events
    assert event.correlation == {"request_id": "req-claim", "actor_id": "api_key:ab12"}
    assert (event.id, event.payload, event.metadata) == (
        emitted.id,
        {"n": 4},
        emitted.metadata,
    )
    assert event.created_at == emitted.created_at
    assert event.created_at.utcoffset() == dt.timedelta(0)


@pytest.mark.django_db
def test_the_hot_path_cursor_refuses_a_broken_transaction_like_django(org: Organization) -> None:
    with transaction.atomic():
        with (
            pytest.raises(DatabaseError),
            transaction.atomic(savepoint=False),
            connection.cursor() as cursor,
        ):
            cursor.execute("SELECT 1 / 0")
        with pytest.raises(TransactionManagementError):
            eventbus.emit_many(
                [{"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 1}}],
                organization=org,
            )
        with pytest.raises(TransactionManagementError):
            claims.claim(consumers=["effect-a-worker"], batch_size=1, worker_id="w")
