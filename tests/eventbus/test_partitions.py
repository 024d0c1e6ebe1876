"""The partitioned event log: the online upgrade, idempotency across partitions, partitions
ahead (job and health check), and the archive dropping a whole month."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.db import connection, transaction

import eventbus
from core import rls
from core.models import Organization
from eventbus import archive, partitions
from eventbus import claim as claims
from eventbus.models import Delivery, EventLog
from jobs.registry import job_run
from tests.support.storage import use_local_storage

pytestmark = pytest.mark.django_db(transaction=True)

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
ALERTS: list[tuple[str, dict[str, object]]] = []


def record_alert(subject: str, details: dict[str, object]) -> None:
    ALERTS.append((subject, details))


OLD_DAY = dt.date(2026, 2, 20)  # its month is wholly more than 90 days before NOW


def restore_unpartitioned() -> None:
    """Undo an upgrade for the next tests (the kept old table back as event_log; rows go)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('event_log_unpartitioned') IS NOT NULL")
        if not cursor.fetchone()[0]:  # not swapped (a failed upgrade): drop what it made
            cursor.execute("DROP TRIGGER IF EXISTS event_log_mirror ON event_log")
            cursor.execute("DROP TABLE IF EXISTS event_log_partitioned, event_log_idempotency")
            return
        cursor.execute("DROP TABLE event_log")
        cursor.execute("DROP TABLE IF EXISTS event_log_idempotency")
        cursor.execute("ALTER TABLE event_log_unpartitioned RENAME TO event_log")
        cursor.execute(partitions.INDEXES_SQL, {"table": "event_log"})
        for name, _, _ in cursor.fetchall():
            cursor.execute(f"ALTER INDEX {name} RENAME TO {name.removesuffix('_unpart')}")
        cursor.execute("TRUNCATE event_log")


@pytest.fixture
def undo_upgrade() -> Iterator[None]:
    yield
    restore_unpartitioned()


@pytest.fixture
def partitioned(undo_upgrade: None) -> None:
    partitions.upgrade()


def emit_keyed(org: Organization, key: str | None, n: int = 0) -> uuid.UUID:
    with transaction.atomic():
        return eventbus.emit(
            "test.effect", organization=org, entity_kind="t", payload={"n": n}, idempotency_key=key
        ).id


def relkind() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'event_log'::regclass")
        return str(cursor.fetchone()[0])


def test_the_upgrade_runs_online_with_nothing_lost_and_nothing_twice(
    org: Organization, undo_upgrade: None
) -> None:
    before = [emit_keyed(org, f"before-{i}" if i % 3 == 0 else None, i) for i in range(120)]
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
                i += 1
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=emitter)
    thread.start()
    deadline = time.monotonic() + 30
    while len(emitted) < 20 and time.monotonic() < deadline:  # emits are flowing
        time.sleep(0.01)
    copies: list[int] = []
    report = partitions.upgrade(batch=10, progress=lambda r: copies.append(len(emitted)))
    while len(emitted) < (copies[-1] if copies else 0) + 20 and time.monotonic() < deadline:
        time.sleep(0.01)  # and keep flowing after the swap
    stop.set()
    thread.join(timeout=30)

    assert not errors
    assert relkind() == "p"
    assert report.batches >= 12  # 120 rows before, in batches of 10, then the mirrored ones
    assert len(set(copies)) > 1, "no emit happened while the batches were copied"
    everything = before + emitted
    rows = list(EventLog.objects.values_list("id", flat=True))
    assert len(rows) == len(set(rows)) == len(set(everything))
    assert set(rows) == set(everything)
    assert all(first == again for first, again in repeats)
    assert Delivery.objects.exclude(event_id__in=rows).count() == 0
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
        assert result.rows_processed == 2
        partitions.check_partitions_ahead()
        assert partitions.months_covered_ahead() == 3
        emit_keyed(org, None)  # lands in this month's partition


def test_the_archive_writes_a_month_then_drops_its_partition(
    org: Organization, org_b: Organization, tmp_path: Path, settings: object, undo_upgrade: None
) -> None:
    root = use_local_storage(settings, "archive", tmp_path)
    with time_machine.travel(dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)):
        old = [emit_keyed(org, f"k{i}", i) for i in range(3)] + [emit_keyed(org_b, None)]
    Delivery.objects.update(status="done")
    with time_machine.travel(NOW, tick=False):
        recent = emit_keyed(org, None)
        partitions.upgrade()
        assert "event_log_p202602" in {p.name for p in partitions.partitions()}
        report = archive.archive_due()
    assert (report.months, report.days, report.events) == (1, 2, 4)
    assert "event_log_p202602" not in {p.name for p in partitions.partitions()}
    assert list(EventLog.objects.values_list("id", flat=True)) == [recent]
    assert Delivery.objects.filter(event_id__in=old).count() == 0
    assert (root / str(org.id) / "2026" / "02" / "20.manifest.json").exists()
    with time_machine.travel(NOW, tick=False):
        assert emit_keyed(org, "k0") not in old  # the dropped month's keys were released
        restored = archive.restore_day(org_b.id, OLD_DAY)  # re-creates the month's partition
    assert restored.events == 1
    assert EventLog.objects.filter(id=old[3]).exists()


def test_a_month_with_unfinished_work_waits(
    org: Organization, tmp_path: Path, settings: object, undo_upgrade: None
) -> None:
    use_local_storage(settings, "archive", tmp_path)
    with time_machine.travel(dt.datetime.combine(OLD_DAY, dt.time(10), tzinfo=dt.UTC)):
        emit_keyed(org, None)
    with time_machine.travel(NOW, tick=False):
        partitions.upgrade()
        report = archive.archive_due()
    assert (report.months, report.skipped) == (0, 1)
    assert EventLog.objects.count() == 1


def test_the_command_upgrades_and_drops_the_old_table(
    org: Organization, undo_upgrade: None
) -> None:
    emit_keyed(org, "a")
    call_command("partition_event_log", "--batch", "1")
    assert relkind() == "p"
    call_command("partition_event_log", "--ahead")
    assert partitions.months_covered_ahead() == 3
    with connection.cursor() as cursor:  # keep the real old table for restore_unpartitioned
        cursor.execute("ALTER TABLE event_log_unpartitioned RENAME TO saved_event_log")
        cursor.execute("CREATE TABLE event_log_unpartitioned (id int)")
    call_command("partition_event_log", "--drop-old")
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('event_log_unpartitioned')")
        assert cursor.fetchone()[0] is None
        cursor.execute("ALTER TABLE saved_event_log RENAME TO event_log_unpartitioned")


def test_the_tenant_wall_covers_the_partitions_and_the_key_table(
    enforced: None, org: Organization, org_b: Organization, partitioned: None
) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_class c"
            " WHERE (c.relname LIKE 'event_log%%') AND c.relkind IN ('r', 'p')"
            "   AND c.relname <> 'event_log_unpartitioned'"
            "   AND NOT (c.relrowsecurity AND c.relforcerowsecurity AND EXISTS ("
            "        SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid"
            "           AND p.polname = 'tenant_wall'))"
        )
        assert cursor.fetchall() == []
    mine = emit_keyed(org, "mine")
    emit_keyed(org_b, "mine")  # another tenant's key of the same name: its own event
    with rls.scoped(organization_id=org.pk):
        assert list(EventLog.objects.values_list("id", flat=True)) == [mine]
        assert emit_keyed(org, "mine") == mine  # the key trigger works under the wall
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM {partitions.partitions()[0].name}")
            assert cursor.fetchone()[0] == 1  # a partition read by name: the wall too


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
        partitions.upgrade()
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
