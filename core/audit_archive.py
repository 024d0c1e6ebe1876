"""Retention of the audit log (seed 000 §6.9, seed 001 §1.1): old rows to verified archives.

Every UTC day older than AUDIT_LOG_HOT_DAYS (90) is written, per organization, to the `archive`
storage as `audit-log/<organization or "none">/<YYYY>/<MM>/audit-<YYYY-MM-DD>.ndjson.gz` (one
row per line as PostgreSQL renders it, `to_jsonb`), read back and checked against its manifest
(`...manifest.json`: count, ids, SHA-256), and only then are exactly the archived rows deleted
from `deskcomm_auditlog`. A day whose manifest exists is never rewritten. Archives older than
AUDIT_LOG_ARCHIVE_YEARS (5) are deleted by the same job. `archived_rows` reads them back (the
LGPD audit-trail extraction covers archived years too).
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import connection, transaction
from django.utils import timezone

logger = logging.getLogger(__name__)

ROOT = "audit-log"
NO_ORGANIZATION = "none"
DAYS_PER_RUN = 31  # bounded work per run: a backlog is caught up over several runs
DELETE_BATCH = 5000

# Organization-days with rows older than the cutoff (a range scan of audit_created_idx).
DUE_DAYS_SQL = """
SELECT organization_id, (created_at AT TIME ZONE 'UTC')::date AS day
  FROM deskcomm_auditlog
 WHERE created_at < %(cutoff)s
 GROUP BY 1, 2
 ORDER BY 2, 1
 LIMIT %(limit)s
"""

# One organization-day in id order, each row rendered by PostgreSQL itself.
EXPORT_SQL = """
SELECT to_jsonb(a)::text
  FROM deskcomm_auditlog a
 WHERE a.organization_id IS NOT DISTINCT FROM %(org)s
   AND a.created_at >= %(start)s AND a.created_at < %(end)s
 ORDER BY a.id
"""

DELETE_SQL = "DELETE FROM deskcomm_auditlog WHERE id = ANY(%(ids)s)"


class AuditArchiveError(Exception):
    """An audit archive is missing or does not match its manifest (nothing was deleted)."""


@dataclass
class AuditArchiveReport:
    """What one run did: organization-days archived, hot rows deleted, expired files removed."""

    days: int = 0
    rows: int = 0
    expired_files: int = 0


def archive_storage() -> Storage:
    return storages["archive"]


def paths(organization_id: uuid.UUID | None, day: dt.date) -> tuple[str, str]:
    """(data file, manifest) names of one organization-day."""
    stem = f"{ROOT}/{organization_id or NO_ORGANIZATION}/{day:%Y}/{day:%m}/audit-{day.isoformat()}"
    return f"{stem}.ndjson.gz", f"{stem}.manifest.json"


def archive_due(*, now: dt.datetime | None = None) -> AuditArchiveReport:
    """Archive and delete the audit rows past the hot window; drop archives past retention."""
    now = now or timezone.now()
    cutoff = _day_start(now.astimezone(dt.UTC).date() - dt.timedelta(days=_hot_days()))
    with connection.cursor() as cursor:
        cursor.execute(DUE_DAYS_SQL, {"cutoff": cutoff, "limit": DAYS_PER_RUN})
        due = cursor.fetchall()
    report = AuditArchiveReport()
    for organization_id, day in due:
        report.rows += archive_day(organization_id, day)
        report.days += 1
    report.expired_files = prune_expired(now=now)
    return report


def archive_day(organization_id: uuid.UUID | None, day: dt.date) -> int:
    """Archive one organization-day (unless archived), verify it, delete the archived rows."""
    storage = archive_storage()
    data_name, manifest_name = paths(organization_id, day)
    if storage.exists(manifest_name):
        manifest = read_manifest(storage, manifest_name)
    else:
        manifest = _write_day(storage, organization_id, day)
    rows = read_verified(storage, data_name, manifest)
    deleted = _delete([row["id"] for row in rows])
    logger.info(
        "audit archive: %s %s -> %s (%d rows deleted)", organization_id, day, data_name, deleted
    )
    return deleted


def archived_rows(organization_ids: list[uuid.UUID | None]) -> Iterator[dict[str, Any]]:
    """Every archived audit row of these organizations (`None`: rows without one), verified."""
    storage = archive_storage()
    for organization_id in organization_ids:
        for manifest_name in _manifests(storage, f"{ROOT}/{organization_id or NO_ORGANIZATION}"):
            manifest = read_manifest(storage, manifest_name)
            yield from read_verified(storage, manifest["file"], manifest)


def prune_expired(*, now: dt.datetime) -> int:
    """Delete archive files of days older than AUDIT_LOG_ARCHIVE_YEARS; returns files deleted."""
    today = now.astimezone(dt.UTC).date()
    # Whole months: never a day short of the retention, and no 29 February to trip on.
    oldest_kept = dt.date(today.year - int(settings.AUDIT_LOG_ARCHIVE_YEARS), today.month, 1)
    storage = archive_storage()
    deleted = 0
    for manifest_name in _manifests_up_to(storage, oldest_kept.year):
        day = dt.date.fromisoformat(manifest_name.rsplit("audit-", 1)[1][:10])
        if day < oldest_kept:
            storage.delete(manifest_name.replace(".manifest.json", ".ndjson.gz"))
            storage.delete(manifest_name)
            deleted += 2
    return deleted


def _manifests_up_to(storage: Storage, year: int) -> Iterator[str]:
    """Manifests of the years up to `year` only: the daily run never lists the recent ones."""
    for organization in _folders(storage, ROOT):
        for name in _folders(storage, f"{ROOT}/{organization}"):
            if name.isdigit() and int(name) <= year:
                yield from _manifests(storage, f"{ROOT}/{organization}/{name}")


def read_manifest(storage: Storage, name: str) -> dict[str, Any]:
    with storage.open(name, "rb") as handle:
        manifest: dict[str, Any] = json.loads(handle.read())
    return manifest


def read_verified(storage: Storage, name: str, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The file's rows, after checking its SHA-256, count and ids against the manifest."""
    if not storage.exists(name):
        raise AuditArchiveError(f"audit archive {name} is missing (its manifest exists)")
    with storage.open(name, "rb") as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise AuditArchiveError(f"audit archive {name} does not match its manifest's SHA-256")
    rows = [json.loads(line) for line in gzip.decompress(data).decode().splitlines()]
    if [row["id"] for row in rows] != manifest["ids"]:
        raise AuditArchiveError(f"audit archive {name} does not hold its manifest's rows")
    return rows


# -- helpers --------------------------------------------------------------------------------


def _write_day(storage: Storage, organization_id: uuid.UUID | None, day: dt.date) -> dict[str, Any]:
    data_name, manifest_name = paths(organization_id, day)
    start, end = _day_start(day), _day_start(day + dt.timedelta(days=1))
    with connection.cursor() as cursor:
        cursor.execute(EXPORT_SQL, {"org": organization_id, "start": start, "end": end})
        lines = [row[0] for row in cursor.fetchall()]
    # mtime=0: the same rows always give the same bytes (and the same SHA-256).
    data = gzip.compress("".join(f"{line}\n" for line in lines).encode(), mtime=0)
    if storage.exists(data_name):  # a previous run died before its manifest: redo the file
        storage.delete(data_name)
    saved = storage.save(data_name, ContentFile(data))
    manifest = {
        "organization_id": str(organization_id) if organization_id else None,
        "day": day.isoformat(),
        "file": saved,
        "rows": len(lines),
        "ids": [json.loads(line)["id"] for line in lines],
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "created_at": timezone.now().isoformat(),
    }
    read_verified(storage, saved, manifest)  # what was stored reads back as what was exported
    storage.save(manifest_name, ContentFile(json.dumps(manifest, indent=2).encode()))
    return manifest


def _delete(ids: list[int]) -> int:
    deleted = 0
    for i in range(0, len(ids), DELETE_BATCH):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(DELETE_SQL, {"ids": ids[i : i + DELETE_BATCH]})
            deleted += cursor.rowcount
    return deleted


def _manifests(storage: Storage, folder: str) -> Iterator[str]:
    """Every manifest under `folder`, depth first, oldest first (names sort by date)."""
    folders, files = _listing(storage, folder)
    for name in sorted(files):
        if name.endswith(".manifest.json"):
            yield f"{folder}/{name}"
    for sub in sorted(folders):
        yield from _manifests(storage, f"{folder}/{sub}")


def _folders(storage: Storage, folder: str) -> list[str]:
    return sorted(_listing(storage, folder)[0])


def _listing(storage: Storage, folder: str) -> tuple[list[str], list[str]]:
    try:
        return storage.listdir(folder)
    except FileNotFoundError:  # the filesystem storage before the first archive (S3: empty)
        return [], []


def _hot_days() -> int:
    return int(settings.AUDIT_LOG_HOT_DAYS)


def _day_start(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time.min, tzinfo=dt.UTC)
