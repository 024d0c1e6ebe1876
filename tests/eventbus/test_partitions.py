"""The partitioned bus tables: the online upgrade of the log, its deliveries and attempts,
idempotency and one delivery per (event, consumer) across partitions, partitions ahead (job and
health check), and the archive dropping a whole month."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import IntegrityError, connection, transaction

import eventbus
from core import rls
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.retry import Verdict
from eventbus.history import archive, partition_upgrade, partitions
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from jobs.registry import job_run
from tests.support.storage import use_local_storage

pytestmark = pytest.mark.django_db(transaction=True)

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
ALERTS: list[tuple[str, dict[str, object]]] = []


def record_alert(subject: str, details: dict[str, object]) -> None:
    ALERTS.append((subject, details))


OLD_DAY = dt.date(2026, 2, 20)  # its month is wholly more than 90 days before NOW


def restore_unpartitioned() -> None:
    """Undo an upgrade for the next tests (each kept old table back under its name; rows go).
    Attempts first: the new attempts' tenant wall names the new deliveries."""
    with connection.cursor() as cursor:
        for table in reversed(partitions.TABLES):
            cursor.execute(f"DROP TRIGGER IF EXISTS {table.name}_mirror ON {table.name}")
            cursor.execute(f"DROP FUNCTION IF EXISTS {table.name}_mirror_to_partitioned()")
            cursor.execute(f"DROP TABLE IF EXISTS {table.partitioned_name}")
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [table.unpartitioned_name])
            if cursor.fetchone()[0]:  # swapped: the old table back
                cursor.execute(f"DROP TABLE {table.name}")
                cursor.execute(f"ALTER TABLE {table.unpartitioned_name} RENAME TO {table.name}")
                cursor.execute(partition_upgrade.INDEXES_SQL, {"table": table.name})
                for name, *_ in cursor.fetchall():
                    cursor.execute(f"ALTER INDEX {name} RENAME TO {name.removesuffix('_unpart')}")
        cursor.execute("DROP TABLE IF EXISTS event_log_idempotency")
        cursor.execute("TRUNCATE event_log, eventbus_delivery, eventbus_deliveryattempt")


@pytest.fixture
def undo_upgrade() -> Iterator[None]:
    yield
    restore_unpartitioned()


@pytest.fixture
def partitioned(undo_upgrade: None) -> None:
    partition_upgrade.upgrade()


def emit_keyed(org: Organization, key: str | None, n: int = 0) -> uuid.UUID:
    with transaction.atomic():
        return eventbus.emit(
            "test.effect", organization=org, entity_kind="t", payload={"n": n}, idempotency_key=key
        ).id


def relkind(table: str = "event_log") -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [table])
        return str(cursor.fetchone()[0])


def fail(batch: claims.Claim, *, dead: bool = False) -> None:
    verdict = Verdict(dead=dead, delay=0, error_class="Boom", error="boom")
    claims.nack(batch.token, [claims.Failure(e.delivery_id, verdict) for e in batch.events])


def scalar(query: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(query, params)
        return cursor.fetchone()[0]


def test_the_upgrade_runs_online_with_nothing_lost_and_nothing_twice(
    org: Organization, undo_upgrade: None
) -> None:
    before = [emit_keyed(org, f"before-{i}" if i % 3 == 0 else None, i) for i in range(120)]
    failed = [0]  # attempts recorded, before and during the upgrade
    batch = claims.claim(consumers=["effect-c-worker"], batch_size=30, worker_id="w")
    fail(batch, dead=True)
    failed[0] += len(batch.events)
    with connection.cursor() as cursor:  # rows written before deliveries carried their event's time
        cursor.execute("UPDATE eventbus_delivery SET event_created_at = NULL WHERE id % 2 = 0")
        cursor.execute("UPDATE eventbus_deliveryattempt SET event_created_at = NULL")
    emitted: list[uuid.UUID] = []
    repeats: list[tuple[uuid.UUID, uuid.UUID]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def emitter() -> None:
        try:
            i = 0
            while not stop.is_set():
                first = emit_keyed(org, f"during-{i}", i)
                emitted.append(first)
                repeats.append((first, emit_keyed(org, f"during-{i}", i)))  # same key: same id
                emitted.append(emit_keyed(org, None, i))
                batch = claims.claim(consumers=["effect-a-worker"], batch_size=5, worker_id="w")
                claims.ack(batch.token, [e.delivery_id for e in batch.events])  # updates too
                batch = claims.claim(consumers=["effect-b-worker"], batch_size=3, worker_id="w")
                fail(batch)  # retried: an attempt row each, and the delivery back to pending
                failed[0] += len(batch.events)
                i += 1
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=emitter)
    thread.start()
    deadline = time.monotonic() + 60
    while len(emitted) < 20 and time.monotonic() < deadline:  # emits are flowing
        time.sleep(0.01)
    copies: list[tuple[str, int]] = []
    report = partition_upgrade.upgrade(
        batch=10, progress=lambda r: copies.append((r.table, len(emitted)))
    )
    while len(emitted) < copies[-1][1] + 20 and time.monotonic() < deadline:
        time.sleep(0.01)  # and keep flowing after the swap
    stop.set()
    thread.join(timeout=30)

    assert not errors
    assert [relkind(t.name) for t in partitions.TABLES] == ["p", "p", "p"]
    assert report.tables == ["event_log", "eventbus_delivery", "eventbus_deliveryattempt"]
    assert report.batches >= 12 + 36  # 120 events and 360 deliveries in batches of 10, and more
    assert len({emits for table, emits in copies if table == "eventbus_delivery"}) > 1, (
        "no emit happened while the deliveries were copied"
    )
    everything = before + emitted
    rows = list(EventLog.objects.values_list("id", flat=True))
    assert len(rows) == len(set(rows)) == len(set(everything))
    assert set(rows) == set(everything)
    assert all(first == again for first, again in repeats)
    assert Delivery.objects.exclude(event_id__in=rows).count() == 0
    # Every event has its three deliveries, once each, and ids stayed unique (the new table's
    # identity continued after the old one's: the primary key alone, (id, event_created_at),
    # would let a reused id through in another month).
    assert Delivery.objects.count() == 3 * len(rows)
    assert scalar("SELECT count(DISTINCT id) FROM eventbus_delivery") == 3 * len(rows)
    assert scalar("SELECT count(DISTINCT (event_id, consumer)) FROM eventbus_delivery") == 3 * len(
        rows
    )
    # Every delivery and attempt carries its event's time, the NULLs of older rows filled.
    assert scalar(
        "SELECT count(*) FROM eventbus_delivery d JOIN event_log e ON e.id = d.event_id"
        " WHERE d.event_created_at = e.created_at"
    ) == 3 * len(rows)
    assert DeliveryAttempt.objects.count() == failed[0] > 30
    assert (
        scalar(
            "SELECT count(*) FROM eventbus_deliveryattempt a"
            " JOIN eventbus_delivery d ON d.id = a.delivery_id"
            " WHERE a.event_created_at = d.event_created_at"
        )
        == failed[0]
    )
    with connection.cursor() as cursor:  # the acks' summary updates all reached the new table
        cursor.execute(
            "SELECT count(*) FROM event_log e WHERE e.consumed_by IS DISTINCT FROM ARRAY("
            " SELECT d.consumer FROM eventbus_delivery d WHERE d.event_id = e.id"
            " AND d.status = 'done' ORDER BY 1)::text[]"
        )
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM eventbus_delivery WHERE status = 'done'")
        assert cursor.fetchone()[0] > 0
    with connection.cursor() as cursor:  # every key is in the key table, once
        cursor.execute("SELECT count(*) FROM event_log_idempotency")
        keys = cursor.fetchone()[0]
    assert keys == EventLog.objects.exclude(idempotency_key=None).count()


def test_idempotency_keys_hold_across_partitions(org: Organization, partitioned: None) -> None:
    first = emit_keyed(org, "order-1")
    assert emit_keyed(org, "order-1") == first
    with transaction.atomic():
        ids = eventbus.emit_many(
            [
                {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 1}}
                | {"idempotency_key": k}
                for k in ("order-1", "order-2", "order-2")
            ],
            organization=org,
        )
    assert ids[0] == first and ids[1] == ids[2] != first
    with connection.cursor() as cursor:  # the SQL function (triggers) too
        cursor.execute(
            "SELECT emit_event('test.effect', 't', NULL, '{\"n\": 1}', %s, %s)",
            ['{"idempotency_key": "order-2"}', org.id],
        )
        assert cursor.fetchone()[0] == ids[1]
    # A key from another month's partition still counts: the key table is not partitioned.
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=40), tick=False):
        assert emit_keyed(org, "order-1") == first
    assert EventLog.objects.count() == 2
    EventLog.objects.filter(id=first).delete()  # deleting an event releases its key
    assert emit_keyed(org, "order-1") != first


def test_the_claim_reads_the_partitioned_log(org: Organization, partitioned: None) -> None:
    event_id = emit_keyed(org, None)
    batch = claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="w")
    assert [e.id for e in batch.events] == [event_id]
    claims.ack(batch.token, [e.delivery_id for e in batch.events])
    assert EventLog.objects.get(id=event_id).consumed_by == ["effect-a-worker"]


def test_the_partitions_job_keeps_months_ahead_and_the_health_check_says_when_behind(
    org: Organization, partitioned: None
) -> None:
    partitions.check_partitions_ahead()  # the upgrade made this month and 3 ahead
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=62)
    with time_machine.travel(later, tick=False):
        with pytest.raises(partitions.PartitionError, match="run the event-log-partitions job"):
            partitions.check_partitions_ahead()
        result = job_run(name="event-log-partitions", trigger="manual")
        assert result.rows_processed == 2 * 3  # two months of the log, deliveries, attempts
        partitions.check_partitions_ahead()
        assert partitions.months_covered_ahead() == 3
        emit_keyed(org, None)  # lands in this month's partition


def month_partitions(month: str) -> list[str]:
    """The partitions of `month` (YYYYMM) each bus table has."""
    return [
        p.name
        for table in partitions.TABLES
        for p in partitions.partitions(table.name)
        if p.name.endswith(f"_p{month}")
    ]


def test_the_archive_writes_a_month_then_drops_its_partitions(
    org: Organization, org_b: Organization, tmp_path: Path, settings: object, undo_upgrade: None
) -> None:
    root = use_local_storage(settings, "archive", tmp_path)
    at = dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)
    with time_machine.travel(at):
        old = [emit_keyed(org, f"k{i}", i) for i in range(3)] + [emit_keyed(org_b, None)]
        batch = claims.claim(consumers=["effect-c-worker"], batch_size=10, worker_id="w")
        fail(batch, dead=True)
    assert DeliveryAttempt.objects.count() == 4
    Delivery.objects.update(status="done")
    # Tenant B's day was archived before deliveries carried their event's time (migration 0022):
    # its file has none, and its rows none until the upgrade fills them.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE eventbus_delivery SET event_created_at = NULL")
        cursor.execute("UPDATE eventbus_deliveryattempt SET event_created_at = NULL")
    archive._write_day(
        archive.archive_storage(), org_b.id, OLD_DAY, at.replace(hour=0), at + dt.timedelta(days=1)
    )
    with time_machine.travel(NOW, tick=False):
        recent = emit_keyed(org, None)
        partition_upgrade.upgrade()
        assert month_partitions("202602") == [
            "event_log_p202602",
            "eventbus_delivery_p202602",
            "eventbus_deliveryattempt_p202602",
        ]
        report = archive.archive_due()
    assert (report.months, report.days, report.events) == (1, 2, 4)
    assert month_partitions("202602") == []  # the log's, the deliveries' and the attempts'
    assert list(EventLog.objects.values_list("id", flat=True)) == [recent]
    assert Delivery.objects.filter(event_id__in=old).count() == 0
    assert DeliveryAttempt.objects.count() == 0
    assert (root / str(org.id) / "2026" / "02" / "20.manifest.json").exists()
    with time_machine.travel(NOW, tick=False):
        assert emit_keyed(org, "k0") not in old  # the dropped month's keys were released
        restored = archive.restore_day(org_b.id, OLD_DAY)  # re-creates the month's partitions
    assert (restored.events, restored.deliveries, restored.attempts) == (1, 3, 1)
    assert len(month_partitions("202602")) == 3
    assert EventLog.objects.filter(id=old[3]).exists()
    # The old file's deliveries and attempt got their event's time back (the partition key).
    assert (
        scalar(
            "SELECT count(*) FROM eventbus_delivery d JOIN event_log e ON e.id = d.event_id"
            " WHERE d.event_created_at = e.created_at AND e.id = %s",
            [old[3]],
        )
        == 3
    )
    event = EventLog.objects.get(id=old[3])
    assert DeliveryAttempt.objects.get().event_created_at == event.created_at


def test_a_month_with_unfinished_work_waits(
    org: Organization, tmp_path: Path, settings: object, undo_upgrade: None
) -> None:
    use_local_storage(settings, "archive", tmp_path)
    with time_machine.travel(dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)):
        emit_keyed(org, None)
    with time_machine.travel(NOW, tick=False):
        partition_upgrade.upgrade()
        report = archive.archive_due()
    assert (report.months, report.skipped) == (0, 1)
    assert EventLog.objects.count() == 1


def test_a_month_replayed_while_its_files_are_written_is_dropped_only_later(
    org: Organization, tmp_path: Path, settings: object, undo_upgrade: None, monkeypatch: Any
) -> None:
    use_local_storage(settings, "archive", tmp_path)
    with time_machine.travel(dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)):
        old = emit_keyed(org, None)
    Delivery.objects.update(status="done")
    write_day = archive._write_day

    def write_then_replay(*args: Any, **kwargs: Any) -> Any:
        manifest = write_day(*args, **kwargs)
        claims.replay([old], consumer="effect-a-worker", max_attempts=8)  # an operator, now
        return manifest

    monkeypatch.setattr(archive, "_write_day", write_then_replay)
    with time_machine.travel(NOW, tick=False):
        partition_upgrade.upgrade()
        report = archive.archive_due()
    assert (report.months, report.skipped, report.days) == (0, 1, 1)  # written, not dropped
    assert len(month_partitions("202602")) == 3
    assert Delivery.objects.get(event_id=old, consumer="effect-a-worker").status == "pending"
    monkeypatch.setattr(archive, "_write_day", write_day)
    Delivery.objects.update(status="done")
    with time_machine.travel(NOW, tick=False):
        assert archive.archive_due().months == 1  # the day's file is there: read back, dropped
    assert month_partitions("202602") == []


def test_the_command_upgrades_and_drops_the_old_tables(
    org: Organization, undo_upgrade: None
) -> None:
    emit_keyed(org, "a")
    out = StringIO()
    call_command("partition_event_log", "--batch", "1", stdout=out)
    assert [relkind(t.name) for t in partitions.TABLES] == ["p", "p", "p"]
    assert "partitioned event_log, eventbus_delivery, eventbus_deliveryattempt" in out.getvalue()
    assert "4 rows copied in 4 batch(es)" in out.getvalue()  # an event and its 3 deliveries
    call_command("partition_event_log", "--ahead")
    assert partitions.months_covered_ahead() == 3
    with pytest.raises(CommandError, match="already partitioned"):
        call_command("partition_event_log")
    olds = [t.unpartitioned_name for t in partitions.TABLES]
    with connection.cursor() as cursor:  # keep the real old tables for restore_unpartitioned
        for old in olds:
            cursor.execute(f"ALTER TABLE {old} RENAME TO saved_{old}")
            cursor.execute(f"CREATE TABLE {old} (id int)")
    out = StringIO()
    call_command("partition_event_log", "--drop-old", stdout=out)
    assert out.getvalue().strip() == f"dropped {', '.join(reversed(olds))}"
    with connection.cursor() as cursor:
        for old in olds:
            cursor.execute("SELECT to_regclass(%s)", [old])
            assert cursor.fetchone()[0] is None
            cursor.execute(f"ALTER TABLE saved_{old} RENAME TO {old}")


def test_the_tenant_wall_covers_the_partitions_and_the_key_table(
    enforced: None, org: Organization, org_b: Organization, partitioned: None
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c"
            " WHERE (c.relname LIKE 'event_log%%' OR c.relname LIKE 'eventbus_delivery%%')"
            "   AND c.relkind IN ('r', 'p') AND c.relname NOT LIKE '%%_unpartitioned'"
            "   AND NOT (c.relrowsecurity AND c.relforcerowsecurity AND EXISTS ("
            "        SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid"
            "           AND p.polname = 'tenant_wall'))"
        )
        assert cursor.fetchall() == []
    mine = emit_keyed(org, "mine")
    emit_keyed(org_b, "mine")  # another tenant's key of the same name: its own event
    fail(claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="w"))
    month = partitions.partitions()[-4].lower  # this month's (three are ahead)
    with rls.scoped(organization_id=org.pk):
        assert list(EventLog.objects.values_list("id", flat=True)) == [mine]
        assert emit_keyed(org, "mine") == mine  # the key trigger works under the wall
        assert set(Delivery.objects.values_list("event_id", flat=True)) == {mine}
        assert list(DeliveryAttempt.objects.values_list("delivery__event_id", flat=True)) == [mine]
        for table in partitions.TABLES:  # a partition read by name: the wall too
            assert (
                scalar(f"SELECT count(*) FROM {table.partition_name(month)}")
                == {
                    "event_log": 1,
                    "eventbus_delivery": 3,
                    "eventbus_deliveryattempt": 1,
                }[table.name]
            )


def test_one_delivery_per_event_and_consumer_holds_and_replays_reset_it(
    org: Organization, partitioned: None
) -> None:
    event_id = emit_keyed(org, None)
    batch = claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="w")
    claims.ack(batch.token, batch.ids)
    first = Delivery.objects.get(event_id=event_id, consumer="effect-a-worker")
    with (
        pytest.raises(IntegrityError, match="_event_id_consumer_event_created_"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type,"
            " status, attempts, max_attempts, next_attempt_at, created_at, updated_at,"
            " event_created_at) SELECT event_id, organization_id, consumer, event_type,"
            " 'pending', 0, 8, now(), now(), now(), event_created_at"
            " FROM eventbus_delivery WHERE id = %s",
            [first.id],
        )
    # replay.sql names the constraint: the done delivery goes back to pending (no second row),
    # and a consumer without one gets a new delivery.
    moved = claims.replay([event_id], consumer="effect-a-worker", max_attempts=8)
    assert [m.delivery_id for m in moved] == [first.id]
    assert Delivery.objects.get(id=first.id).status == "pending"
    new = claims.replay([event_id], consumer="replay-target-worker", max_attempts=8)
    assert Delivery.objects.filter(event_id=event_id).count() == 4
    assert Delivery.objects.get(id=new[0].delivery_id).event_created_at == first.event_created_at


def test_a_log_partitioned_alone_gets_its_deliveries_and_attempts_partitioned_later(
    org: Organization, tmp_path: Path, settings: object, undo_upgrade: None
) -> None:
    """An install an earlier version upgraded (the log only): its month's deliveries are
    deleted in batches by the archive until the next upgrade partitions them too."""
    use_local_storage(settings, "archive", tmp_path)
    with time_machine.travel(dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)):
        emit_keyed(org, None)
        emit_keyed(org, None)
        fail(claims.claim(consumers=["effect-a-worker"], batch_size=1, worker_id="w"), dead=True)
    with time_machine.travel(NOW, tick=False):
        emit_keyed(org, None)
        with pytest.raises(partitions.PartitionError, match="partition event_log first"):
            partition_upgrade.upgrade(tables=[partitions.DELIVERIES])
        partition_upgrade.upgrade(tables=[partitions.EVENTS])
        assert [relkind(t.name) for t in partitions.TABLES] == ["p", "r", "r"]
        Delivery.objects.update(status="done")
        report = archive.archive_due()  # the deliveries deleted in batches, the log dropped
        assert (report.months, report.events) == (1, 2)
        assert month_partitions("202602") == []
        assert (Delivery.objects.count(), DeliveryAttempt.objects.count()) == (3, 0)
        report = partition_upgrade.upgrade()
        assert report.tables == ["eventbus_delivery", "eventbus_deliveryattempt"]
        assert [relkind(t.name) for t in partitions.TABLES] == ["p", "p", "p"]
        months = [p.lower for p in partitions.partitions("event_log")]  # March to September
        assert [p.lower for p in partitions.partitions("eventbus_delivery")] == months
        assert [p.lower for p in partitions.partitions("eventbus_deliveryattempt")] == months
        assert partitions.months_covered_ahead() == 3
        emit_keyed(org, None)
    assert Delivery.objects.count() == 6


def test_concurrent_emits_of_one_key_make_one_event(org: Organization, partitioned: None) -> None:
    keys = [f"race-{i}" for i in range(40)]
    results: dict[int, list[uuid.UUID]] = {0: [], 1: []}
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def emitter(side: int) -> None:
        try:
            for key in keys:
                barrier.wait(timeout=30)  # both emit the same key at the same moment
                results[side].append(emit_keyed(org, key))
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=emitter, args=(side,)) for side in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert results[0] == results[1]
    assert EventLog.objects.count() == len(keys) == len(set(results[0]))


def test_a_month_whose_files_do_not_hold_its_rows_is_not_dropped(
    org: Organization, tmp_path: Path, settings: object, undo_upgrade: None
) -> None:
    use_local_storage(settings, "archive", tmp_path)
    at = dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)
    with time_machine.travel(at):
        emit_keyed(org, None)
    archive._write_day(  # archived with one event ...
        archive.archive_storage(), org.id, OLD_DAY, at.replace(hour=0), at + dt.timedelta(days=1)
    )
    with time_machine.travel(at):
        emit_keyed(org, None)  # ... and a second one arrives (say, a restore of another copy)
    deliveries = Delivery.objects.update(status="done")
    with time_machine.travel(NOW, tick=False):
        partition_upgrade.upgrade()
        with pytest.raises(archive.ArchiveError, match="nothing dropped"):
            archive.archive_due()
    assert "event_log_p202602" in {p.name for p in partitions.partitions()}
    assert EventLog.objects.count() == 2 and Delivery.objects.count() == deliveries


def test_the_partitions_job_alerts_when_it_cannot_keep_enough_ahead(
    org: Organization, partitioned: None, settings: Any
) -> None:
    ALERTS.clear()
    settings.ALERT_HOOKS = [f"{__name__}.record_alert"]
    settings.EVENTBUS = {**settings.EVENTBUS, "PARTITIONS_AHEAD": 1}  # fewer than the minimum 2
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=95), tick=False):
        job_run(name="event-log-partitions", trigger="manual")
    assert [subject for subject, _ in ALERTS] == ["event log partitions behind"]
    assert "1 month(s) after this one (wanted 2)" in str(ALERTS[0][1]["error"])
