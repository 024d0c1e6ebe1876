"""Rewrite an organization's archived days (the LGPD redaction reaches the archives through it).

Every day of the organization is read back and verified; a caller's function may change each
record (an event with its deliveries and their attempt log) in place and says whether it did.
A changed day is written as a new file (`<DD>.r<stamp>.ndjson.gz`), read back and verified, its
manifest replaced (new checksum and size, `rewritten_at`), and only then is the old file deleted,
so the manifest always names a complete, verified file and a restore brings back the rewritten
rows only. It runs under the organization's archive lock, in the caller's transaction.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import logging
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from django.core.files.storage import Storage
from django.db import transaction
from django.utils import timezone

from eventbus.history import archive

logger = logging.getLogger(__name__)

# Changes one archived record in place; True when it changed something.
RecordRewrite = Callable[[dict[str, Any]], bool]


def rewrite_organization(organization_id: uuid.UUID, rewrite: RecordRewrite) -> int:
    """Apply `rewrite` to every archived record of the organization; returns days rewritten."""
    storage = archive.archive_storage()
    rewritten = 0
    with transaction.atomic():
        archive.lock_organization(organization_id)
        for day in archived_days(storage, organization_id):
            manifest, lines = archive.read_day(storage, organization_id, day)
            records = [json.loads(line) for line in lines]
            changed = [rewrite(record) for record in records]  # every record, no short cut
            if any(changed):
                _replace(storage, organization_id, day, manifest, records)
                rewritten += 1
    return rewritten


def archived_days(storage: Storage, organization_id: uuid.UUID) -> list[dt.date]:
    """The days of the organization that have a manifest, oldest first."""
    return sorted(_days(storage, f"{organization_id}"))


def _days(storage: Storage, root: str) -> Iterator[dt.date]:
    if not storage.exists(root):
        return
    years, _ = storage.listdir(root)
    for year in years:
        months, _ = storage.listdir(f"{root}/{year}")
        for month in months:
            _, files = storage.listdir(f"{root}/{year}/{month}")
            for name in files:
                if name.endswith(".manifest.json"):
                    day = name.removesuffix(".manifest.json")
                    yield dt.date(int(year), int(month), int(day))


def _replace(
    storage: Storage,
    organization_id: uuid.UUID,
    day: dt.date,
    manifest: dict[str, Any],
    records: list[dict[str, Any]],
) -> None:
    old_file = manifest["file"]
    stem = archive.paths(organization_id, day)[0].removesuffix(".ndjson.gz")
    name = f"{stem}.r{timezone.now():%Y%m%dT%H%M%S%f}.ndjson.gz"
    counts = {key: manifest[key] for key in ("events", "deliveries", "attempts")}
    with tempfile.TemporaryFile() as tmp:
        with gzip.GzipFile(fileobj=tmp, mode="wb", mtime=0) as gz:
            for record in records:
                gz.write(json.dumps(record, ensure_ascii=False).encode() + b"\n")
        archive.store_day(
            storage,
            organization_id,
            day,
            tmp,
            counts,
            name=name,
            rewritten_at=timezone.now().isoformat(),
        )
    if old_file != name and storage.exists(old_file):
        storage.delete(old_file)
    logger.info("archive: %s %s rewritten as %s (%s removed)", organization_id, day, name, old_file)
