"""Retention (R-E6): events past the hot window go to gzip NDJSON files, verified, then deleted.

One file per organization and UTC day, `<organization>/<YYYY>/<MM>/<DD>.ndjson.gz` in the
`archive` storage (`STORAGES["archive"]`: the filesystem by default, S3-compatible via
django-storages when configured). Each line is one event as PostgreSQL renders the row
(`to_jsonb`), with its deliveries, each with its failed attempts (`attempt_log`). Next to it,
`<DD>.manifest.json` holds the counts and the SHA-256 of the file; it is written only once the
file has been read back and verified, and its presence is what "already archived" means: a later
run never rewrites that day, it only removes hot rows still there (say, after a restore). Rows are
deleted in bounded batches, each its own short transaction. A day with deliveries still pending or
running is left for a later run.

Partitioned tables (eventbus/history/partitions.py) are archived a month at a time instead: once a
month's partitions are wholly older than the hot window and none of its deliveries is unfinished,
every organization-day in it is written (or found archived) as above, the files are read back and
their event counts checked against the log's partition, its idempotency keys are released, and
the month's partitions of the log, the deliveries and the attempts are detached and dropped: no
row-by-row delete, no dead tuples left for vacuum. (A log that an earlier version partitioned
alone has its month's deliveries and attempts deleted in batches first.)

`restore_day` reads a day back into the hot tables (same ids; existing rows are kept) so it can be
inspected and replayed to a chosen consumer. `eventbus.history.archive_rewrite` rewrites archived
days (the LGPD redaction): the manifest names the current file.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import logging
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

from django.core.files import File
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils import timezone
from psycopg import sql

from eventbus.dispatch import claim as claims
from eventbus.history import partitions
from eventbus.store.conf import bus_settings

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
DAYS_PER_RUN = 31  # bounded work per run: a long backlog is caught up over several days
EXPORT_CHUNK = 500

# Organization-days with events older than the cutoff (a range scan of event_log_created_idx).
DUE_DAYS_SQL = """
SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date AS day
  FROM event_log
 WHERE created_at < %(cutoff)s
 GROUP BY 1, 2
 ORDER BY 2, 1
 LIMIT %(limit)s
"""

UNFINISHED_SQL = """
SELECT EXISTS (
    SELECT 1 FROM event_log e JOIN eventbus_delivery d ON d.event_id = e.id
     WHERE e.organization_id = %(org)s AND e.created_at >= %(start)s AND e.created_at < %(end)s
       AND d.status IN ('pending', 'processing')
)
"""

# One chunk of a day, in (created_at, id) order after the last row written: each event with its
# deliveries and their attempts, rendered by PostgreSQL itself so restore is the exact inverse.
EXPORT_SQL = """
SELECT e.created_at, e.id, jsonb_build_object(
    'event', to_jsonb(e),
    'deliveries', coalesce((
        SELECT jsonb_agg(to_jsonb(d) || jsonb_build_object('attempt_log', coalesce((
                   SELECT jsonb_agg(to_jsonb(a) ORDER BY a.attempt, a.id)
                     FROM eventbus_deliveryattempt a WHERE a.delivery_id = d.id), '[]'::jsonb))
               ORDER BY d.id)
          FROM eventbus_delivery d WHERE d.event_id = e.id), '[]'::jsonb)
)::text
  FROM event_log e
 WHERE e.organization_id = %(org)s AND e.created_at >= %(start)s AND e.created_at < %(end)s
   AND (e.created_at, e.id) > (%(after_at)s, %(after_id)s)
 ORDER BY e.created_at, e.id
 LIMIT %(limit)s
"""

# One bounded batch of a day's hot rows: attempts, deliveries, events (FKs are deferred). The
# created_at range again on the delete lets a partitioned log read only the day's partition.
DELETE_BATCH_SQL = """
WITH ev AS (
    SELECT id FROM event_log
     WHERE organization_id = %(org)s AND created_at >= %(start)s AND created_at < %(end)s
     LIMIT %(limit)s
), dl AS (
    SELECT id FROM eventbus_delivery WHERE event_id IN (SELECT id FROM ev)
), attempts AS (
    DELETE FROM eventbus_deliveryattempt WHERE delivery_id IN (SELECT id FROM dl)
), deliveries AS (
    DELETE FROM eventbus_delivery WHERE id IN (SELECT id FROM dl)
)
DELETE FROM event_log
 WHERE id IN (SELECT id FROM ev) AND created_at >= %(start)s AND created_at < %(end)s
"""

# A month's partition: its organization-days; whether its deliveries (their own partition) are
# all finished (the claim's and the reaper's partial indexes: pending and processing rows only);
# and, for a log partitioned alone, one batch of its events' deliveries (and their attempts) in
# event id order after the last batch (partitions are read by their own names).
MONTH_UNFINISHED_SQL = """
SELECT EXISTS (SELECT 1 FROM {partition} WHERE status = 'pending')
    OR EXISTS (SELECT 1 FROM {partition} WHERE status = 'processing')
"""
MONTH_DAYS_SQL = """
SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date AS day, count(*)
  FROM {partition} GROUP BY 1, 2 ORDER BY 2, 1
"""
MONTH_DELETE_BATCH_SQL = """
WITH ev AS MATERIALIZED (
    SELECT id FROM {partition} WHERE id > %(after)s ORDER BY id LIMIT %(limit)s
), dl AS MATERIALIZED (
    SELECT d.id FROM eventbus_delivery d WHERE d.event_id IN (SELECT id FROM ev)
), attempts AS (
    DELETE FROM eventbus_deliveryattempt WHERE delivery_id IN (SELECT id FROM dl)
), deliveries AS (
    DELETE FROM eventbus_delivery WHERE id IN (SELECT id FROM dl)
)
SELECT (SELECT id FROM ev ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM ev)
"""

TENANT_SQL = "SELECT id FROM deskcomm_organization WHERE id = %s FOR KEY SHARE"

# One organization's archive files change under this lock (held to the end of the transaction):
# writing a new day, rewriting days (the LGPD redaction) and reading a day back for a restore
# never interleave, so a redaction cannot miss a day being written nor a restore read a file
# being replaced.
ARCHIVE_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('eventbus.archive'), hashtext(%s::text))"

# Archives written before a NOT NULL column existed lack its key: it gets the column's default.
RESTORE_EVENT_SQL = """
INSERT INTO event_log
SELECT * FROM jsonb_populate_record(NULL::event_log, '{"priority": 0}'::jsonb || %s::jsonb)
ON CONFLICT DO NOTHING
"""
RESTORE_DELIVERY_SQL = """
INSERT INTO eventbus_delivery
SELECT * FROM jsonb_populate_record(
    NULL::eventbus_delivery,
    '{"priority": 0, "isolate": false, "redelivered": false, "publish_failures": 0}'::jsonb
    || %s::jsonb
)
ON CONFLICT DO NOTHING
"""
RESTORE_ATTEMPT_SQL = """
INSERT INTO eventbus_deliveryattempt
SELECT * FROM jsonb_populate_record(NULL::eventbus_deliveryattempt, %s::jsonb)
ON CONFLICT DO NOTHING
"""


class ArchiveError(Exception):
    """An archive is missing, or does not match its manifest (nothing was deleted or restored)."""


@dataclass
class ArchiveReport:
    """What one archive run did."""

    days: int = 0  # organization-days written (or found archived) and removed from hot tables
    months: int = 0  # partitions dropped (a partitioned log)
    events: int = 0  # hot event rows deleted
    skipped: int = 0  # days left for later (deliveries still pending or running)


@dataclass(frozen=True)
class RestoreReport:
    """What a restore wrote back (rows already present are not counted)."""

    events: int
    deliveries: int
    attempts: int
    replayed: int


def archive_storage() -> Storage:
    return storages["archive"]


def paths(organization_id: uuid.UUID, day: dt.date) -> tuple[str, str]:
    """(data file, manifest) names of one organization-day."""
    stem = f"{organization_id}/{day:%Y}/{day:%m}/{day:%d}"
    return f"{stem}.ndjson.gz", f"{stem}.manifest.json"


def archive_due(*, now: dt.datetime | None = None) -> ArchiveReport:
    """Archive and delete every organization-day older than the hot window (bounded per run)."""
    now = now or timezone.now()
    hot_days = bus_settings.ARCHIVE_HOT_DAYS
    cutoff = _day_start(now.astimezone(dt.UTC).date() - dt.timedelta(days=hot_days))
    if partitions.is_partitioned():
        return archive_months(cutoff)
    with connection.cursor() as cursor:
        cursor.execute(DUE_DAYS_SQL, {"cutoff": cutoff, "limit": DAYS_PER_RUN})
        due = cursor.fetchall()
    report = ArchiveReport()
    for org_id, day in due:
        deleted = archive_day(org_id, day)
        if deleted is None:
            report.skipped += 1
            continue
        report.days += 1
        report.events += deleted
    return report


def archive_months(cutoff: dt.datetime) -> ArchiveReport:
    """A partitioned log: archive and drop the oldest month wholly before `cutoff` (one a run:
    bounded work; a backlog of months is caught up over several runs)."""
    report = ArchiveReport()
    due = [p for p in partitions.partitions() if p.upper <= cutoff]
    if due:
        archive_month(due[0], report)
    return report


def archive_month(partition: partitions.Partition, report: ArchiveReport) -> None:
    """Archive every organization-day of a month's partition, verify, then drop the month's
    partitions.

    Leaves the month for a later run (report.skipped) while any delivery is unfinished; raises
    ArchiveError (dropping nothing) when a file does not hold the partition's rows.
    """
    name = sql.Identifier(partition.name)
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL(MONTH_DAYS_SQL).format(partition=name))
        days = cursor.fetchall()
    deliveries_partitioned = partitions.is_partitioned(partitions.DELIVERIES.name)
    if _month_has_unfinished(partition, days, deliveries_partitioned):
        logger.info("archive: %s has deliveries still running; later", partition.name)
        report.skipped += 1
        return
    storage = archive_storage()
    for org_id, day, hot in days:
        start, end = _day_start(day), _day_start(day + dt.timedelta(days=1))
        with transaction.atomic():
            lock_organization(org_id)
            if storage.exists(paths(org_id, day)[1]):  # written earlier: read it back again
                manifest = read_day(storage, org_id, day)[0]
            else:  # store_day has just read it back (SHA-256 and count)
                manifest = _write_day(storage, org_id, day, start, end)
        if manifest["events"] != hot:
            raise ArchiveError(
                f"archive of {org_id} {day} holds {manifest['events']} events; the partition "
                f"{partition.name} has {hot}: nothing dropped"
            )
        report.days += 1
        report.events += hot
    if _month_has_unfinished(partition, days, deliveries_partitioned):  # a replay meanwhile
        logger.info("archive: %s has deliveries queued since; dropped later", partition.name)
        report.skipped += 1
        return
    if not deliveries_partitioned:
        _delete_month_deliveries(name)
    partitions.release_keys(partition.lower, partition.upper)
    partitions.drop_month(partition.lower)
    report.months += 1
    logger.info("archive: %s archived (%d days) and dropped", partition.name, len(days))


def _month_has_unfinished(
    partition: partitions.Partition,
    days: list[tuple[uuid.UUID, dt.date, int]],
    deliveries_partitioned: bool,
) -> bool:
    if deliveries_partitioned:
        month = sql.Identifier(partitions.DELIVERIES.partition_name(partition.lower))
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL(MONTH_UNFINISHED_SQL).format(partition=month))
            return bool(cursor.fetchone()[0])
    return any(
        _has_unfinished(org_id, _day_start(day), _day_start(day + dt.timedelta(days=1)))
        for org_id, day, _ in days
    )


def _delete_month_deliveries(partition: sql.Identifier) -> None:
    statement = sql.SQL(MONTH_DELETE_BATCH_SQL).format(partition=partition)
    after = uuid.UUID(int=0)
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, {"after": after, "limit": bus_settings.ARCHIVE_DELETE_BATCH})
            last, seen = cursor.fetchone()
        if not seen:
            return
        after = last


def archive_day(organization_id: uuid.UUID, day: dt.date) -> int | None:
    """Archive one organization-day (unless already archived), verify it, delete its hot rows.

    Returns the number of event rows deleted, or None when the day still has unfinished work.
    """
    start, end = _day_start(day), _day_start(day + dt.timedelta(days=1))
    if _has_unfinished(organization_id, start, end):
        logger.info("archive: %s %s has deliveries still running; later", organization_id, day)
        return None
    storage = archive_storage()
    manifest_name = paths(organization_id, day)[1]
    with transaction.atomic():
        lock_organization(organization_id)
        if storage.exists(manifest_name):
            manifest = read_day(storage, organization_id, day)[0]
        else:
            manifest = _write_day(storage, organization_id, day, start, end)
    deleted = _delete_day(organization_id, start, end)
    logger.info(
        "archive: %s %s -> %s (%d events in the file, %d hot rows deleted)",
        organization_id,
        day,
        manifest["file"],
        manifest["events"],
        deleted,
    )
    return deleted


def lock_organization(organization_id: uuid.UUID) -> None:
    """Take the organization's archive lock until the current transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(ARCHIVE_LOCK_SQL, [organization_id])


def read_day(
    storage: Storage, organization_id: uuid.UUID, day: dt.date
) -> tuple[dict[str, Any], list[str]]:
    """An archived day's manifest and its lines, verified against it (ArchiveError if not)."""
    manifest_name = paths(organization_id, day)[1]
    if not storage.exists(manifest_name):
        raise ArchiveError(f"no archive for organization {organization_id} on {day}")
    manifest = _read_manifest(storage, manifest_name)
    return manifest, _verify(storage, manifest["file"], manifest)


def restore_day(
    organization_id: uuid.UUID, day: dt.date, *, replay_to: str | None = None
) -> RestoreReport:
    """Write an archived day back into the hot tables; optionally replay it to one consumer."""
    counts = [0, 0, 0]
    event_ids: list[uuid.UUID] = []
    with transaction.atomic(), connection.cursor() as cursor:
        lock_organization(organization_id)
        lines = read_day(archive_storage(), organization_id, day)[1]
        # Partitioned, its month may have been dropped: create it again.
        partitions.ensure_months(_day_start(day), _day_start(day + dt.timedelta(days=1)))
        # event_log has no per-row foreign key (see eventbus.store.emitter): check the tenant here,
        # holding it until the restore commits, as every emit does.
        cursor.execute(TENANT_SQL, [organization_id])
        if cursor.fetchone() is None:
            raise ArchiveError(
                f"organization {organization_id} does not exist: nothing to restore its events "
                "into (re-create the organization first)"
            )
        for line in lines:
            record = json.loads(line)
            event_ids.append(uuid.UUID(record["event"]["id"]))
            for kind, statement, row in _rows_of(record):
                cursor.execute(statement, [json.dumps(row)])
                counts[kind] += cursor.rowcount
        replayed = _replay(event_ids, replay_to) if replay_to else 0
    return RestoreReport(counts[0], counts[1], counts[2], replayed)


def _rows_of(record: dict[str, Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(kind: 0 event, 1 delivery, 2 attempt; statement; row) in foreign-key order.

    Deliveries and attempts get their event's time (`event_created_at`, the partition key)
    where the archive has none: days archived before they carried it."""
    event = record["event"]
    yield 0, RESTORE_EVENT_SQL, event
    for delivery in record["deliveries"]:
        yield 1, RESTORE_DELIVERY_SQL, _with_event_time(delivery, event)
    for delivery in record["deliveries"]:
        for attempt in delivery.get("attempt_log", []):
            yield 2, RESTORE_ATTEMPT_SQL, _with_event_time(attempt, event)


def _with_event_time(row: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    return row if row.get("event_created_at") else {**row, "event_created_at": event["created_at"]}


def _replay(event_ids: list[uuid.UUID], consumer: str) -> int:
    from eventbus.store.registry import registry

    target = registry.get(consumer)
    return len(
        claims.replay(event_ids, consumer=target.name, max_attempts=target.effective_max_attempts())
    )


def _write_day(
    storage: Storage, organization_id: uuid.UUID, day: dt.date, start: dt.datetime, end: dt.datetime
) -> dict[str, Any]:
    data_name = paths(organization_id, day)[0]
    with tempfile.TemporaryFile() as tmp:
        counts = _export(tmp, organization_id, start, end)
        if storage.exists(data_name):  # a previous run died before its manifest: redo the file
            storage.delete(data_name)
        return store_day(storage, organization_id, day, tmp, counts, name=data_name)


def store_day(
    storage: Storage,
    organization_id: uuid.UUID,
    day: dt.date,
    data: IO[bytes],
    counts: dict[str, int],
    *,
    name: str,
    **extra: Any,
) -> dict[str, Any]:
    """Save a day's gzip file as `name`, read it back, then write the manifest that points at
    it (replacing the previous one). Returns the manifest."""
    data.seek(0)
    digest, size = _sha256(data)
    data.seek(0)
    saved = storage.save(name, File(data))
    manifest = {
        "format_version": FORMAT_VERSION,
        "organization_id": str(organization_id),
        "day": day.isoformat(),
        "file": saved,
        **counts,
        "sha256": digest,
        "bytes": size,
        "created_at": timezone.now().isoformat(),
        **extra,
    }
    _verify(storage, saved, manifest)
    manifest_name = paths(organization_id, day)[1]
    if storage.exists(manifest_name):
        storage.delete(manifest_name)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(json.dumps(manifest, indent=2).encode())
        tmp.seek(0)
        storage.save(manifest_name, File(tmp))
    return manifest


def _export(
    out: IO[bytes], organization_id: uuid.UUID, start: dt.datetime, end: dt.datetime
) -> dict[str, int]:
    counts = {"events": 0, "deliveries": 0, "attempts": 0}
    after: tuple[dt.datetime, uuid.UUID] = (start - dt.timedelta(microseconds=1), uuid.UUID(int=0))
    # mtime=0: the same rows always give the same bytes (and the same SHA-256).
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        while True:
            rows = _export_chunk(organization_id, start, end, after)
            for _, _, line in rows:
                gz.write(line.encode() + b"\n")
                _count(counts, json.loads(line))
            if len(rows) < EXPORT_CHUNK:
                return counts
            after = (rows[-1][0], rows[-1][1])


def _export_chunk(
    organization_id: uuid.UUID,
    start: dt.datetime,
    end: dt.datetime,
    after: tuple[dt.datetime, uuid.UUID],
) -> list[tuple[dt.datetime, uuid.UUID, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            EXPORT_SQL,
            {
                "org": organization_id,
                "start": start,
                "end": end,
                "after_at": after[0],
                "after_id": after[1],
                "limit": EXPORT_CHUNK,
            },
        )
        return list(cursor.fetchall())


def _count(counts: dict[str, int], record: dict[str, Any]) -> None:
    counts["events"] += 1
    counts["deliveries"] += len(record["deliveries"])
    counts["attempts"] += sum(len(d["attempt_log"]) for d in record["deliveries"])


def _verify(storage: Storage, name: str, manifest: dict[str, Any]) -> list[str]:
    """Read the file back: its SHA-256 and line count must match the manifest. Returns lines."""
    if not storage.exists(name):
        raise ArchiveError(f"archive file {name} is missing (its manifest exists)")
    with storage.open(name, "rb") as handle:
        data = handle.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != manifest["sha256"]:
        raise ArchiveError(f"archive file {name} does not match its manifest's SHA-256")
    lines = gzip.decompress(data).decode().splitlines()
    if len(lines) != manifest["events"]:
        raise ArchiveError(
            f"archive file {name} has {len(lines)} events; its manifest says {manifest['events']}"
        )
    return lines


def _read_manifest(storage: Storage, name: str) -> dict[str, Any]:
    with storage.open(name, "rb") as handle:
        manifest: dict[str, Any] = json.loads(handle.read())
    return manifest


def _sha256(handle: IO[bytes]) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    while chunk := handle.read(1 << 20):
        digest.update(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _has_unfinished(organization_id: uuid.UUID, start: dt.datetime, end: dt.datetime) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(UNFINISHED_SQL, {"org": organization_id, "start": start, "end": end})
        row = cursor.fetchone()
    return bool(row and row[0])


def _delete_day(organization_id: uuid.UUID, start: dt.datetime, end: dt.datetime) -> int:
    deleted = 0
    batch = bus_settings.ARCHIVE_DELETE_BATCH
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                DELETE_BATCH_SQL,
                {"org": organization_id, "start": start, "end": end, "limit": batch},
            )
            count = cursor.rowcount
        deleted += count
        if count < batch:
            return deleted


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)
