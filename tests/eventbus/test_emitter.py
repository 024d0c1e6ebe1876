"""emit / emit_many / the emit_event SQL function: what gets written, and what never does."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import DatabaseError, connection, connections, transaction
from django.test.utils import override_settings
from psycopg.rows import dict_row

import eventbus
from core import context
from core.db import bound_cursor, conninfo
from core.models import Organization
from crm.models import Lead
from eventbus.store import emitter
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from eventbus.store.registry import Consumer, registry
from eventbus.store.sql import statement
from tests.support.consumers import EFFECT_CONSUMERS

pytestmark = pytest.mark.django_db
GHOST_ID = uuid.UUID(int=0xDEAD)


def counts() -> tuple[int, int]:
    return EventLog.objects.count(), Delivery.objects.count()


def test_emit_writes_event_and_one_delivery_per_consumer(org: Organization) -> None:
    event = eventbus.emit("test.effect", organization=org, entity_kind="thing", payload={"n": 1})
    stored = EventLog.objects.get(pk=event.pk)
    assert stored.status == "pending"
    assert stored.fanout == 3
    assert stored.payload == {"n": 1}
    deliveries = Delivery.objects.filter(event=event)
    assert sorted(d.consumer for d in deliveries) == sorted(EFFECT_CONSUMERS)
    assert {d.status for d in deliveries} == {"pending"}
    assert {d.organization_id for d in deliveries} == {org.pk}


def test_metadata_gets_version_time_and_ambient_ids(org: Organization) -> None:
    with context.bind(request_id="req-1", actor_id="user-9", source="api"):
        event = eventbus.emit(
            "test.effect",
            organization=org,
            entity_kind="thing",
            payload={"n": 1},
            metadata={"trace_id": "t-1"},
        )
    meta = EventLog.objects.get(pk=event.pk).metadata
    assert meta["request_id"] == "req-1"
    assert meta["actor_id"] == "user-9"
    assert meta["source"] == "api"
    assert meta["trace_id"] == "t-1"
    assert meta["schema_version"] == 1
    assert dt.datetime.fromisoformat(meta["emitted_at"]).tzinfo is not None


def test_the_returned_event_is_the_row_as_the_orm_loads_it(org: Organization) -> None:
    event = eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="thing",
        entity_id=uuid.uuid4(),
        payload={"n": 1, "nested": {"a": [1, 2]}},
        idempotency_key="returned-1",
        ordering_key="conversation-7",
        priority=3,
    )
    stored = EventLog.objects.get(pk=event.pk)
    for field in EventLog._meta.concrete_fields:
        assert getattr(event, field.attname) == getattr(stored, field.attname), field.attname
    assert (event._state.adding, event._state.db) == (False, "default")


def max_attempts_by_consumer(event: EventLog) -> dict[str, int]:
    return dict(Delivery.objects.filter(event=event).values_list("consumer", "max_attempts"))


def test_a_settings_change_reaches_the_next_emit(org: Organization) -> None:
    def emit(n: int, padding: str = "") -> EventLog:
        payload = {"n": n, "padding": padding}
        return eventbus.emit("test.effect", organization=org, entity_kind="thing", payload=payload)

    before = max_attempts_by_consumer(emit(1))  # what emit() works out once is now cached
    changed = {
        **getattr(settings, "EVENTBUS", {}),
        "CONSUMER_MAX_ATTEMPTS": {"effect-a-worker": 2},
        "MAX_PAYLOAD_BYTES": 200,
    }
    with override_settings(EVENTBUS=changed):
        assert max_attempts_by_consumer(emit(2))["effect-a-worker"] == 2
        with pytest.raises(eventbus.EventValidationError, match="MAX_PAYLOAD_BYTES"):
            emit(3, padding="x" * 300)
    assert max_attempts_by_consumer(emit(4, padding="x" * 300)) == before
    assert before["effect-a-worker"] != 2


def test_a_registry_change_reaches_the_next_emit_whatever_the_names(org: Organization) -> None:
    def consumers_of_an_emit() -> set[str]:
        payload = {"n": 1}
        event = eventbus.emit("test.effect", organization=org, entity_kind="thing", payload=payload)
        return set(Delivery.objects.filter(event=event).values_list("consumer", flat=True))

    assert consumers_of_an_emit() == set(EFFECT_CONSUMERS)
    # Not a valid name (make_consumer refuses it): the quoting of the routes' array parameter.
    odd = Consumer('odd "one", {with} \\ commas-worker', lambda event: None, ("test.effect",))
    with registry.temporarily(odd):
        assert consumers_of_an_emit() == {*EFFECT_CONSUMERS, odd.name}
    assert consumers_of_an_emit() == set(EFFECT_CONSUMERS)


def test_event_without_consumers_is_done_at_once(org: Organization) -> None:
    event = eventbus.emit(
        "lead.won",
        organization=org,
        entity_kind="lead",
        payload={"value": 10, "won_at": "2026-11-29"},
    )
    assert EventLog.objects.get(pk=event.pk).status == "done"
    assert not Delivery.objects.filter(event=event).exists()


def test_idempotency_key_returns_the_existing_event(org: Organization, org_b: Organization) -> None:
    first = eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="thing",
        payload={"n": 1},
        idempotency_key="k-1",
    )
    again = eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="thing",
        payload={"n": 2},
        idempotency_key="k-1",
    )
    other_org = eventbus.emit(
        "test.effect",
        organization=org_b,
        entity_kind="thing",
        payload={"n": 1},
        idempotency_key="k-1",
    )
    assert again.pk == first.pk
    assert again.payload == {"n": 1}
    assert other_org.pk != first.pk
    assert counts() == (2, 6)
    assert EventLog.objects.get(pk=first.pk).metadata["idempotency_key"] == "k-1"


def test_rollback_takes_event_and_deliveries_away(org: Organization) -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        eventbus.emit("test.effect", organization=org, entity_kind="thing", payload={"n": 1})
        raise RuntimeError("business failure after emit")
    assert counts() == (0, 0)


def nested(levels: int) -> dict[str, object]:
    """A JSON object `levels` deep ({} is one level)."""
    value: dict[str, object] = {}
    for _ in range(levels - 1):
        value = {"d": value}
    return value


# Bad values of one emit field: (the emit keyword arguments, message, the field named).
BAD_FIELDS: list[tuple[dict[str, object], str, str]] = [
    ({"event_type": "Lead.Created"}, "invalid event type", "event_type"),
    ({"event_type": "lead.teleported"}, "unknown event type", "event_type"),
    ({"event_type": "test.effect\x00"}, "invalid event type", "event_type"),
    ({"event_type": "test.effect\ud800"}, "invalid event type", "event_type"),
    ({"payload": {"n": object()}}, "not JSON-serializable", "payload"),
    ({"payload": {"n": float("nan")}}, "not JSON-serializable", "payload"),
    ({"payload": {"n": "a\x00b"}}, "NUL character", "payload"),
    ({"payload": {"n": 1, "a\x00": 1}}, "NUL character", "payload"),
    ({"payload": {"n": "a\ud800b"}}, "unpaired UTF-16 surrogate", "payload"),
    ({"payload": {"n": 1, "\udc00": 1}}, "unpaired UTF-16 surrogate", "payload"),
    ({"payload": {"n": 1, "deep": nested(32)}}, "nested more than 32 levels", "payload"),
    ({"payload": ["n"]}, "must be a JSON object", "payload"),
    ({"payload": {}}, "missing required field", "payload"),
    ({"metadata": {"x": "\udfff"}}, "unpaired UTF-16 surrogate", "metadata"),
    ({"metadata": {"x\x00": "v"}}, "NUL character", "metadata"),
    ({"metadata": {"x": "\x00"}}, "NUL character", "metadata"),
    ({"metadata": {"x": nested(32)}}, "nested more than 32 levels", "metadata"),
    ({"metadata": {"x": "v" * 9000}}, "limit is 8192 bytes", "metadata"),
    ({"metadata": ["x"]}, "must be a JSON object", "metadata"),
    ({"metadata": {"schema_version": 5}}, "no schema version 5", "schema_version"),
    ({"entity_kind": ""}, "entity_kind is required", "entity_kind"),
    ({"entity_kind": "th\x00ing"}, "NUL character", "entity_kind"),
    ({"entity_kind": "th\ud800ing"}, "unpaired UTF-16 surrogate", "entity_kind"),
    ({"entity_id": "nope"}, "not a UUID", "entity_id"),
    ({"idempotency_key": ""}, "idempotency_key", "idempotency_key"),
    ({"idempotency_key": "k\x00"}, "NUL character", "idempotency_key"),
    ({"idempotency_key": "\udbff-k"}, "unpaired UTF-16 surrogate", "idempotency_key"),
    ({"metadata": {"idempotency_key": "k\x00"}}, "NUL character", "idempotency_key"),
]
EFFECT = {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": 1}}


def emit_effect(org: Organization, **changes: object) -> EventLog:
    """`emit` of EFFECT with some of its arguments changed."""
    return eventbus.emit(organization=org, **{**EFFECT, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message", "field"),
    [
        *BAD_FIELDS,
        ({"organization": None}, "organization is required", None),
        ({"organization": "not-a-uuid"}, "not a valid id", None),
        ({"organization": uuid.UUID(int=7)}, "does not exist", None),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(
    org: Organization, kwargs: dict[str, object], message: str, field: str | None
) -> None:
    changes = {"organization": org, **kwargs}
    with transaction.atomic():  # the caller's transaction stays usable after the error
        with pytest.raises(eventbus.EventValidationError, match=message) as raised:
            eventbus.emit(**{**EFFECT, **changes})  # type: ignore[arg-type]
        assert raised.value.field == field  # the argument at fault (the API's field errors)
        assert counts() == (0, 0)
        emit_effect(org)
    assert counts() == (1, 3)


@pytest.mark.parametrize(("kwargs", "message", "field"), BAD_FIELDS)
def test_a_bad_emit_many_item_names_its_index_and_field_and_writes_nothing(
    org: Organization, kwargs: dict[str, object], message: str, field: str
) -> None:
    items: list[dict[str, object]] = [dict(EFFECT), {**EFFECT, **kwargs}, dict(EFFECT)]
    with transaction.atomic():
        with pytest.raises(eventbus.EventValidationError, match=f"^item 1: .*{message}") as raised:
            eventbus.emit_many(items, organization=org)
        assert raised.value.field == field
        assert counts() == (0, 0)
        eventbus.emit_many([EFFECT], organization=org)
    assert counts() == (1, 3)


def test_ten_thousand_levels_of_nesting_are_a_validation_error(org: Organization) -> None:
    deep = {"n": 1, "deep": nested(10_000)}  # deeper than Python's recursion limit
    with transaction.atomic():
        with pytest.raises(eventbus.EventValidationError, match="nested more than") as raised:
            emit_effect(org, payload=deep)
        assert raised.value.field == "payload"
        with pytest.raises(eventbus.EventValidationError, match="item 0: metadata is nested"):
            eventbus.emit_many([{**EFFECT, "metadata": {"x": deep}}], organization=org)
        assert counts() == (0, 0)


def test_nesting_and_metadata_up_to_their_limits_are_accepted(org: Organization) -> None:
    event = emit_effect(org, payload={"n": nested(31)}, metadata={"x": "v" * 7000})
    assert EventLog.objects.get(pk=event.pk).payload == {"n": nested(31)}  # 32 levels
    # The bus's own keys (schema version, time, provenance, causation depth) count too.
    with override_settings(EVENTBUS={"MAX_JSON_DEPTH": 3, "MAX_METADATA_BYTES": 400}):
        emit_effect(org, payload={"n": nested(2)})
        with pytest.raises(eventbus.EventValidationError, match="more than 3 levels"):
            emit_effect(org, payload={"n": nested(3)})
        with pytest.raises(eventbus.EventValidationError, match="EVENTBUS_MAX_METADATA_BYTES"):
            emit_effect(org, metadata={"x": "v" * 400})
    assert counts() == (2, 6)


@override_settings(EVENTBUS={"MAX_PAYLOAD_BYTES": 1024})
def test_oversized_payload_is_rejected(org: Organization) -> None:
    with pytest.raises(eventbus.EventValidationError, match=r"limit is 1024 bytes"):
        eventbus.emit(
            "test.effect",
            organization=org,
            entity_kind="thing",
            payload={"n": 1, "blob": "x" * 2000},
        )
    assert counts() == (0, 0)


def test_default_payload_limit_is_256_kib(org: Organization) -> None:
    eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="thing",
        payload={"n": 1, "blob": "x" * (255 * 1024)},
    )
    with pytest.raises(eventbus.EventValidationError, match="262144"):
        eventbus.emit(
            "test.effect",
            organization=org,
            entity_kind="thing",
            payload={"n": 1, "blob": "x" * (257 * 1024)},
        )
    assert counts() == (1, 3)


def test_emit_many_fans_out_and_keeps_order(org: Organization) -> None:
    items = [
        {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}}
        for i in range(2500)
    ]  # more than one chunk
    items.append(
        {"event_type": "lead.won", "entity_kind": "lead", "payload": {"value": 1, "won_at": "x"}}
    )
    ids = eventbus.emit_many(items, organization=org)
    assert len(ids) == 2501
    assert counts() == (2501, 7500)
    payloads = dict(EventLog.objects.values_list("id", "payload"))
    assert [payloads[i] for i in ids[:3]] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert EventLog.objects.get(pk=ids[-1]).status == "done"


def test_emit_many_numbers_each_consumers_deliveries_in_emit_order(org: Organization) -> None:
    # Ordered consumers run a key's deliveries in delivery-id order: the ids must follow the
    # items, for every consumer of the type (three here), whatever join order the plan takes.
    items = [
        {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}}
        for i in range(1200)
    ]
    eventbus.emit_many(items, organization=org)
    for name in EFFECT_CONSUMERS:
        numbers = list(
            Delivery.objects.filter(consumer=name)
            .order_by("id")
            .values_list("event__payload__n", flat=True)
        )
        assert numbers == list(range(1200)), name


def test_emit_many_idempotency(org: Organization) -> None:
    first = eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="thing",
        payload={"n": 0},
        idempotency_key="dup",
    )
    ids = eventbus.emit_many(
        [
            {
                "event_type": "test.effect",
                "entity_kind": "t",
                "payload": {"n": 1},
                "idempotency_key": "dup",
            },
            {
                "event_type": "test.effect",
                "entity_kind": "t",
                "payload": {"n": 2},
                "idempotency_key": "new",
            },
            {
                "event_type": "test.effect",
                "entity_kind": "t",
                "payload": {"n": 3},
                "idempotency_key": "new",
            },
        ],
        organization=org,
    )
    assert ids[0] == first.pk
    assert ids[1] == ids[2] != first.pk
    assert counts() == (2, 6)


def test_emit_many_validates_everything_before_writing(org: Organization) -> None:
    items = [
        {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 1}},
        {"event_type": "test.effect", "entity_kind": "t", "payload": {}},
    ]
    with pytest.raises(eventbus.EventValidationError, match="item 1: .*missing required"):
        eventbus.emit_many(items, organization=org)
    with pytest.raises(eventbus.EventValidationError, match="item 0: unknown field"):
        eventbus.emit_many([{"event_type": "test.effect", "oops": 1}], organization=org)
    assert counts() == (0, 0)


def test_lead_stage_change_trigger_emits_through_sql(org: Organization) -> None:
    lead = Lead.objects.create(organization=org, name="Big deal", stage_id="new")
    assert not EventLog.objects.exists()  # created, not a stage change
    lead.stage_id = "qualified"
    lead.save()
    lead.name = "Renamed"
    lead.save()  # no stage change: the other fields' trigger (lead_updated_emit, crm 0009)
    assert sorted(EventLog.objects.values_list("event_type", flat=True)) == [
        "lead.stage_changed",
        "lead.updated",
    ]
    event = EventLog.objects.get(event_type="lead.stage_changed")
    assert event.entity_id == lead.pk
    assert event.payload["from_stage_id"] == "new"
    assert event.payload["to_stage_id"] == "qualified"
    assert event.metadata["schema_version"] == 1
    assert event.metadata["source"] == "trigger:deskcomm_lead"


def emit_sql(*args: object) -> object:
    with connection.cursor() as cursor:
        cursor.execute("SELECT emit_event(%s, %s, %s, %s::jsonb, %s::jsonb, %s)", list(args))
        return cursor.fetchone()[0]


def test_sql_emit_event_fans_out_from_the_route_table(org: Organization) -> None:
    event_id = emit_sql(
        "test.effect", "thing", None, '{"n": 1}', '{"idempotency_key": "s1"}', org.pk
    )
    again = emit_sql("test.effect", "thing", None, '{"n": 2}', '{"idempotency_key": "s1"}', org.pk)
    assert again == event_id
    assert sorted(
        Delivery.objects.filter(event_id=event_id).values_list("consumer", flat=True)
    ) == sorted(EFFECT_CONSUMERS)
    assert EventLog.objects.get(pk=event_id).fanout == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("test.effect", "thing", None, '{"n": 1}', "{}", None), "organization is required"),
        (("Bad.Type", "thing", None, '{"n": 1}', "{}", "ORG"), "invalid event type"),
        (("test.unknown", "thing", None, '{"n": 1}', "{}", "ORG"), "unknown event type"),
        (("test.effect", "thing", None, "{}", "{}", "ORG"), "missing required field"),
        (("test.effect", "", None, '{"n": 1}', "{}", "ORG"), "entity_kind is required"),
        (("test.effect", "thing", None, '{"n": 1}', "{}", GHOST_ID), "organization .* not exist"),
    ],
)
def test_sql_emit_event_validates(
    org: Organization, args: tuple[object, ...], message: str
) -> None:
    call = [org.pk if a == "ORG" else a for a in args]
    with pytest.raises(DatabaseError, match=message), transaction.atomic():
        emit_sql(*call)
    assert counts() == (0, 0)


@pytest.mark.django_db(transaction=True)
@override_settings(EVENTBUS={"NOTIFY_EVENT_TYPES": ["test.effect"]})
def test_high_priority_emits_wake_workers_when_they_commit(org: Organization) -> None:
    with psycopg.connect(conninfo(), autocommit=True) as listener:
        listener.execute(f"LISTEN {emitter.WAKEUP_CHANNEL}")
        emit_effect(org, idempotency_key="k")
        emit_effect(org, idempotency_key="k")  # a repeated key: no event, so no wake-up
        with transaction.atomic():
            emit_effect(org)
            transaction.set_rollback(True)  # never committed: never heard
        eventbus.emit(
            "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": "x"}
        )  # not a high-priority type
        eventbus.emit_many([EFFECT, EFFECT], organization=org)  # one wake-up for the call
        with connection.cursor() as cursor:  # committed after all of the above: heard last
            cursor.execute(f"NOTIFY {emitter.WAKEUP_CHANNEL}, 'end'")
        heard: list[str] = []
        for notification in listener.notifies(timeout=10):
            heard.append(notification.payload)
            if notification.payload == "end":
                break
    assert heard == ["test.effect", "emit_many", "end"]


def function_definitions(name: str) -> list[str]:
    """`CREATE OR REPLACE FUNCTION` text of every function called `name`, as the server has it."""
    with bound_cursor() as cursor:
        cursor.row_factory = dict_row
        cursor.execute(
            "SELECT pg_get_functiondef(oid) AS definition FROM pg_proc"
            " WHERE proname = %(name)s ORDER BY oid",
            {"name": name},
        )
        return [row["definition"] for row in cursor.fetchall()]


def test_the_live_emit_event_function_is_the_one_in_its_sql_file() -> None:
    # Migrations apply frozen copies; eventbus/store/sql/emit_event.sql is what must be live.
    # Applying the file must change nothing (a new overload would show as a second definition).
    live = function_definitions("emit_event")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement("emit_event"))
        from_file = function_definitions("emit_event")
        transaction.set_rollback(True)
    assert len(live) == 1
    assert from_file == live, "eventbus/store/sql/emit_event.sql differs from the migrated function"


def test_emit_checks_its_tenant_once_and_writes_nothing_without_it(org: Organization) -> None:
    ghost = Organization(pk=GHOST_ID, name="Ghost", slug="ghost")  # deleted since it was loaded
    with pytest.raises(eventbus.EventValidationError, match="does not exist") as caught:
        eventbus.emit("test.effect", organization=ghost, entity_kind="t", payload={"n": 1})
    assert caught.value.field == "organization"
    assert counts() == (0, 0)
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    assert counts() == (1, 3)  # the transaction is still usable


@pytest.mark.django_db(transaction=True)
def test_an_emit_waits_for_a_concurrent_delete_of_its_tenant(org: Organization) -> None:
    # Another transaction deleted the organization and has not committed yet: the emit's tenant
    # check (FOR KEY SHARE) waits for it, then finds the organization gone and writes nothing.
    with (
        psycopg.connect(conninfo()) as other,
        psycopg.connect(conninfo(), autocommit=True) as watcher,
    ):
        other.execute("DELETE FROM deskcomm_organization WHERE id = %s", [org.pk])
        outcome: list[BaseException | None] = []

        def emit_now() -> None:
            try:
                eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
                outcome.append(None)
            except BaseException as exc:  # handed to the test thread
                outcome.append(exc)
            finally:
                connections.close_all()

        emitter_thread = threading.Thread(target=emit_now)
        emitter_thread.start()
        assert _someone_waits_on_a_lock(watcher), (
            "the emit did not wait for the deleting transaction"
        )
        other.commit()
    emitter_thread.join(timeout=10)
    (error,) = outcome
    assert isinstance(error, eventbus.EventValidationError)
    assert "does not exist" in str(error)
    assert counts() == (0, 0)


@pytest.mark.django_db(transaction=True)
def test_deleting_an_organization_in_sql_cascades_even_under_an_open_emit(
    org: Organization, org_b: Organization
) -> None:
    eventbus.emit_many(_effects(2), organization=org)
    eventbus.emit_many(_effects(1), organization=org_b)
    with connection.cursor() as cursor:  # a failed attempt, so the cascade has all three tables
        cursor.execute(
            "INSERT INTO eventbus_deliveryattempt (delivery_id, attempt, outcome, error_class,"
            " error, worker, created_at) SELECT id, 1, 'retry', 'E', 'e', 'w', now()"
            " FROM eventbus_delivery WHERE organization_id = %s",
            [org.pk],
        )
    with (
        psycopg.connect(conninfo()) as emitting,
        psycopg.connect(conninfo(), autocommit=True) as deleting,
        psycopg.connect(conninfo(), autocommit=True) as watcher,
    ):
        # An emit of `org` is open (it holds the organization row) when the raw DELETE comes.
        emitting.execute(
            "SELECT id FROM deskcomm_organization WHERE id = %s FOR KEY SHARE", [org.pk]
        )
        emitting.execute(
            "INSERT INTO event_log (id, organization_id, event_type, entity_kind, payload,"
            " metadata, consumed_by, attempts, status, fanout, created_at, updated_at)"
            " VALUES (gen_random_uuid(), %s, 'test.effect', 't', '{}', '{}', '{}', 0, 'done', 0,"
            " now(), now())",
            [org.pk],
        )
        deleter = threading.Thread(
            target=lambda: deleting.execute(
                "DELETE FROM deskcomm_organization WHERE id = %s", [org.pk]
            )
        )
        deleter.start()
        assert _someone_waits_on_a_lock(watcher), "the delete did not wait for the open emit"
        emitting.commit()
        deleter.join(timeout=10)
    assert not deleter.is_alive()
    assert not Organization.objects.filter(pk=org.pk).exists()
    assert counts() == (1, 3)  # only org_b's rows are left, none of org's (the late one too)
    assert not DeliveryAttempt.objects.exists()


def _someone_waits_on_a_lock(conn: psycopg.Connection[Any], timeout: float = 10.0) -> bool:
    """Whether a backend of this database comes to wait on a lock within `timeout` (polled; read
    in autocommit, as pg_stat_activity is a snapshot per transaction)."""
    deadline = time.monotonic() + timeout
    while True:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
        if row and row[0]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _effects(n: int, **extra: object) -> list[dict[str, object]]:
    return [
        {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": i}, **extra}
        for i in range(n)
    ]


@pytest.mark.django_db(transaction=True)
def test_emit_many_is_all_or_nothing_across_pipelined_statements(org: Organization) -> None:
    # Outside any transaction (autocommit), with the bad item after two statements went out.
    rows = emitter.EMIT_MANY_STATEMENT_ROWS
    items = _effects(2 * rows + 10)
    items[2 * rows + 5] = {"event_type": "test.effect", "entity_kind": "t", "payload": {}}
    with pytest.raises(eventbus.EventValidationError, match=f"item {2 * rows + 5}: .*missing"):
        eventbus.emit_many(items, organization=org)
    assert counts() == (0, 0)
    # An organization deleted since it was loaded: every statement finds it missing.
    ghost = Organization(pk=GHOST_ID, name="Ghost", slug="ghost")
    with pytest.raises(eventbus.EventValidationError, match=f"organization {GHOST_ID} does not"):
        eventbus.emit_many(_effects(rows + 1), organization=ghost)
    assert counts() == (0, 0)
    ids = eventbus.emit_many(_effects(rows + 1), organization=org)
    assert len(set(ids)) == rows + 1
    assert counts() == (rows + 1, 3 * (rows + 1))


def test_emit_many_idempotency_key_repeated_in_a_later_statement(org: Organization) -> None:
    rows = emitter.EMIT_MANY_STATEMENT_ROWS
    items = _effects(rows + 2)
    items[0]["idempotency_key"] = "same"
    items[rows + 1]["idempotency_key"] = "same"  # in the next statement of the pipeline
    ids = eventbus.emit_many(items, organization=org)
    assert ids[0] == ids[rows + 1]
    assert counts() == (rows + 1, 3 * (rows + 1))
    assert EventLog.objects.get(pk=ids[0]).payload == {"n": 0}  # the first one won


def test_emit_many_of_nothing_writes_nothing(org: Organization) -> None:
    assert eventbus.emit_many([], organization=org) == []
    assert eventbus.emit_many(iter(()), organization=org) == []
    assert counts() == (0, 0)
    ids = eventbus.emit_many((item for item in _effects(3)), organization=org)  # a generator
    assert len(ids) == 3 and counts() == (3, 9)


def test_emit_many_metadata_is_per_event(org: Organization) -> None:
    with context.bind(request_id="req-bulk"):
        ids = eventbus.emit_many(
            [*_effects(2), *_effects(1, metadata={"k": "v"}, idempotency_key="key-1")],
            organization=org,
        )
    meta = dict(EventLog.objects.values_list("id", "metadata"))
    assert meta[ids[0]] == meta[ids[1]]
    assert meta[ids[0]]["request_id"] == "req-bulk"
    assert meta[ids[0]]["schema_version"] == 1
    assert "k" not in meta[ids[0]]
    assert meta[ids[2]]["k"] == "v"
    assert meta[ids[2]]["idempotency_key"] == "key-1"
    assert meta[ids[2]]["request_id"] == "req-bulk"


def test_deleting_an_organization_takes_its_events_and_deliveries(
    org: Organization, org_b: Organization
) -> None:
    # The delivery's keys carry no database constraint (a cost at every emit); Django's
    # cascade still removes the rows with their organization or their event.
    eventbus.emit_many(_effects(3), organization=org)
    eventbus.emit_many(_effects(2), organization=org_b)
    org.delete()
    assert counts() == (2, 6)
    assert set(Delivery.objects.values_list("organization_id", flat=True)) == {org_b.pk}
    EventLog.objects.filter(organization=org_b).first().delete()  # type: ignore[union-attr]
    assert counts() == (1, 3)


def test_causation_id_sits_in_the_metadata_next_to_the_ambient_ids(org: Organization) -> None:
    cause = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    with context.bind(request_id="req-cause"):
        effect = eventbus.emit(
            "test.job",
            organization=org,
            entity_kind="t",
            payload={"n": 2},
            metadata={"source": "pipeline"},
            causation_id=cause.id,
        )
    stored = EventLog.objects.get(pk=effect.pk).metadata
    assert stored["causation_id"] == str(cause.id)
    assert (stored["request_id"], stored["source"]) == ("req-cause", "pipeline")
    assert "causation_id" not in EventLog.objects.get(pk=cause.pk).metadata
    again = eventbus.emit(
        "test.job",
        organization=org,
        entity_kind="t",
        payload={"n": 2},
        causation_id=str(cause.id),  # a string id works too
    )
    assert EventLog.objects.get(pk=again.pk).metadata["causation_id"] == str(cause.id)


def test_a_causation_id_that_is_not_an_event_id_writes_nothing(org: Organization) -> None:
    before = counts()
    with pytest.raises(eventbus.EventValidationError, match="causation_id") as raised:
        eventbus.emit(
            "test.effect",
            organization=org,
            entity_kind="t",
            payload={"n": 1},
            causation_id="not-a-uuid",
        )
    assert raised.value.field == "causation_id"
    assert counts() == before
