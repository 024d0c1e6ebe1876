"""Priorities: within a consumer, higher priority is claimed first; tenants keep their share."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import DataError, connection, transaction
from django.test import override_settings

import eventbus
from core.db import conninfo
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.store import catalog, emitter
from eventbus.store.errors import EventValidationError
from eventbus.store.models import Delivery, EventLog
from tests.support.consumers import ORDER_PROBE_TABLES_SQL
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

PROBE = "priority-probe-worker"
URGENT = 1_000_000  # payload n of the urgent events


@pytest.fixture
def completion_log(db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(ORDER_PROBE_TABLES_SQL)
    yield


def backlog(org: Organization, count: int, *, start: int = 0, priority: int | None = None) -> None:
    item: dict[str, object] = {"event_type": "test.priority", "entity_kind": "test"}
    if priority is not None:
        item["priority"] = priority
    eventbus.emit_many(
        [{**item, "payload": {"n": start + n}} for n in range(count)], organization=org
    )


def claimed(batch: int = 50) -> list[tuple[str, int]]:
    got = claims.claim(consumers=[PROBE], batch_size=batch, worker_id="test:1")
    return [(str(e.organization_id), e.payload["n"]) for e in got.events]


def test_the_catalog_gives_each_type_its_priority_and_an_emit_may_override_it(
    org: Organization,
) -> None:
    assert catalog.priority_of("message.received") == catalog.HIGH_PRIORITY
    assert catalog.priority_of("message.queued") == catalog.HIGH_PRIORITY
    assert catalog.priority_of("lead.updated") == 0
    assert catalog.priority_of("nuvemshop.product_synced") < 0
    event = eventbus.emit(
        "test.priority", organization=org, entity_kind="test", payload={"n": 1}, priority=-3
    )
    assert (event.priority, Delivery.objects.get(event_id=event.pk).priority) == (-3, -3)
    assert EventLog.objects.get(pk=event.pk).priority == -3
    for bad in (11, -11, True, "high", 2.5):
        with pytest.raises(EventValidationError, match="priority"):
            eventbus.emit(
                "test.priority", organization=org, entity_kind="test", payload={"n": 2},
                priority=bad,  # type: ignore[arg-type]
            )  # fmt: skip
    with pytest.raises(EventValidationError, match="item 1: priority"):
        eventbus.emit_many(
            [
                {"event_type": "test.priority", "entity_kind": "test", "payload": {"n": 3}},
                {
                    "event_type": "test.priority",
                    "entity_kind": "test",
                    "payload": {"n": 4},
                    "priority": 99,
                },
            ],
            organization=org,
        )
    assert EventLog.objects.count() == 1  # the refused ones wrote nothing


def test_urgent_events_overtake_the_backlog_of_their_consumer(org: Organization) -> None:
    backlog(org, 300)
    backlog(org, 20, start=URGENT, priority=8)
    first = claimed(50)
    assert sorted(n for _, n in first if n >= URGENT) == list(range(URGENT, URGENT + 20))
    assert len(first) == 50  # the rest of the batch: the backlog (all due at the same instant)
    assert len({n for _, n in first if n < URGENT}) == 30


def test_one_tenants_urgent_flood_leaves_another_tenant_its_share(
    org: Organization, org_b: Organization
) -> None:
    backlog(org, 500, priority=9)
    backlog(org_b, 100)
    first = claimed(100)
    by_org = {str(org.pk): 0, str(org_b.pk): 0}
    for organization, _ in first:
        by_org[organization] += 1
    assert by_org == {str(org.pk): 50, str(org_b.pk): 50}


def test_the_sql_emit_event_function_takes_the_priority_of_the_type_or_the_call(
    org: Organization,
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT emit_event('test.priority', 'test', NULL, '{\"n\": 1}', '{}', %s,"
            " p_priority => 7)",
            [org.pk],
        )
        [given] = cursor.fetchone()
        cursor.execute(
            "SELECT emit_event('lead.updated', 'lead', NULL, '{\"changes\": {}}', '{}', %s)",
            [org.pk],
        )
        [default] = cursor.fetchone()
        with pytest.raises(DataError, match="priority"), transaction.atomic():
            cursor.execute(
                "SELECT emit_event('test.priority', 'test', NULL, '{\"n\": 1}', '{}', %s,"
                " p_priority => 50)",
                [org.pk],
            )
    assert EventLog.objects.get(pk=given).priority == 7
    assert Delivery.objects.get(event_id=given).priority == 7
    assert EventLog.objects.get(pk=default).priority == 0


@pytest.mark.django_db(transaction=True)
@override_settings(EVENTBUS={"NOTIFY_MIN_PRIORITY": 5, "NOTIFY_EVENT_TYPES": []})
def test_the_wake_up_follows_priority(org: Organization) -> None:
    with psycopg.connect(conninfo(), autocommit=True) as listener:
        listener.execute(f"LISTEN {emitter.WAKEUP_CHANNEL}")
        for n, priority in enumerate([0, 4, 5, 9, None]):
            eventbus.emit(
                "test.priority", organization=org, entity_kind="test", payload={"n": n},
                priority=priority,
            )  # fmt: skip
        eventbus.emit(  # a high-priority type (5) emitted as background work: no wake-up
            "message.failed",
            organization=org,
            entity_kind="message",
            payload={"message_id": "m", "error_code": "x", "error_message": "y", "retryable": 0},
            priority=0,
        )
        eventbus.emit_many(
            [{"event_type": "test.priority", "entity_kind": "test", "payload": {"n": 9}}],
            organization=org,
        )  # priority 0: silent
        eventbus.emit_many(
            [
                {"event_type": "test.priority", "entity_kind": "test", "payload": {"n": 10}},
                {
                    "event_type": "test.priority",
                    "entity_kind": "test",
                    "payload": {"n": 11},
                    "priority": 6,
                },
            ],
            organization=org,
        )
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {emitter.WAKEUP_CHANNEL}, 'end'")
        heard: list[str] = []
        for notification in listener.notifies(timeout=10):
            heard.append(notification.payload)
            if notification.payload == "end":
                break
    assert heard == ["test.priority", "test.priority", "emit_many", "end"]


# -- a real drain -----------------------------------------------------------------------------

BACKLOG = 20_000
SECOND_TENANT = 1_000
HIGH = 50


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_running_drain_handles_urgent_events_before_5_percent_of_the_backlog(
    org: Organization, org_b: Organization, completion_log: None, processes: list[Drain]
) -> None:
    backlog(org, BACKLOG)
    backlog(org_b, SECOND_TENANT, start=BACKLOG)
    processes.append(start_drain("--consumer", PROBE, "--concurrency", "8"))

    def completions(where: str = "TRUE", params: tuple[str | int, ...] = ()) -> int:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM test_order_log WHERE {where}", params)
            return int(cursor.fetchone()[0])

    # Mid-stream: the drain is busy with the backlog when the urgent events arrive.
    wait_for(lambda: completions() >= 500, timeout=120, what=processes[0].output)
    with connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(max(id), 0) FROM test_order_log")
        [before] = cursor.fetchone()
    backlog(org, HIGH, start=URGENT, priority=8)
    wait_for(
        lambda: completions("seq >= %s", (URGENT,)) == HIGH,
        timeout=120,
        what=processes[0].output,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM test_order_log WHERE seq >= %s", [URGENT])
        [last_urgent] = cursor.fetchone()
    meanwhile = completions("id > %s AND id < %s AND seq < %s", (before, last_urgent, URGENT))
    assert meanwhile < BACKLOG * 0.05, f"{meanwhile} backlog events ran before the urgent ones"
    # The second tenant's normal events got their share all along: all of them were done
    # long before the first tenant's backlog (equal shares: about one each per claim).
    wait_for(
        lambda: completions("key = %s", (str(org_b.pk),)) == SECOND_TENANT,
        timeout=120,
        what=processes[0].output,
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM test_order_log WHERE key = %s", [str(org_b.pk)])
        [last_b] = cursor.fetchone()
    first_tenant_by_then = completions("id <= %s AND key = %s", (last_b, str(org.pk)))
    assert first_tenant_by_then < 3 * SECOND_TENANT, first_tenant_by_then
