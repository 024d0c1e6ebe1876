"""Audit log retention with controlled time: verified archives, then deletion; 5-year expiry."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.files.storage import storages

from core import audit, audit_archive
from core.models import AuditLog, Organization
from jobs.registry import job_run
from tests.support.s3 import s3_server

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
OLD_DAY = dt.date(2026, 2, 20)  # more than 90 days before NOW


@pytest.fixture
def archive_root(tmp_path: Path, settings: object) -> Path:
    storages = dict(settings.STORAGES)  # type: ignore[attr-defined]
    storages["archive"] = {**storages["archive"], "OPTIONS": {"location": str(tmp_path)}}
    settings.STORAGES = storages  # type: ignore[attr-defined]
    return tmp_path


def audit_on(day: dt.date, org: Organization | None, n: int) -> None:
    with time_machine.travel(dt.datetime.combine(day, dt.time(10), tzinfo=dt.UTC), tick=False):
        for i in range(n):
            audit.record(
                actor="user:ana",
                action="delivery.reprocess",
                target_type="eventbus.delivery",
                target_id=i,
                organization_id=org.pk if org else None,
            )


def test_old_rows_are_archived_verified_and_deleted(org: Organization, archive_root: Path) -> None:
    audit_on(OLD_DAY, org, 3)
    audit_on(OLD_DAY, None, 1)
    audit_on(NOW.date() - dt.timedelta(days=10), org, 2)  # inside the hot window

    with time_machine.travel(NOW, tick=False):
        result = job_run(name="audit-log-archive", trigger="test")

    assert result.status == "completed" and result.rows_processed == 4
    assert AuditLog.objects.filter(action="delivery.reprocess").count() == 2
    data = archive_root / f"audit-log/{org.pk}/2026/02/audit-2026-02-20.ndjson.gz"
    rows = [json.loads(line) for line in gzip.decompress(data.read_bytes()).splitlines()]
    assert [(r["actor"], r["target_id"]) for r in rows] == [("user:ana", str(i)) for i in range(3)]
    manifest = json.loads(data.with_name("audit-2026-02-20.manifest.json").read_text())
    assert manifest["rows"] == 3 and manifest["ids"] == [r["id"] for r in rows]
    assert (archive_root / "audit-log/none/2026/02/audit-2026-02-20.ndjson.gz").exists()
    assert len(list(audit_archive.archived_rows([org.pk]))) == 3


def test_a_rerun_never_rewrites_and_a_tampered_file_deletes_nothing(
    org: Organization, archive_root: Path
) -> None:
    audit_on(OLD_DAY, org, 2)
    with time_machine.travel(NOW, tick=False):
        audit_archive.archive_due()
    data = archive_root / f"audit-log/{org.pk}/2026/02/audit-2026-02-20.ndjson.gz"
    first = data.read_bytes()
    with time_machine.travel(NOW, tick=False):
        assert audit_archive.archive_due().rows == 0  # nothing left, the file untouched
    assert data.read_bytes() == first

    AuditLog.objects.create(actor="x", action="y", target_type="z", target_id="1")
    data.write_bytes(gzip.compress(b'{"id": 1}\n'))
    with pytest.raises(audit_archive.AuditArchiveError, match="SHA-256"):
        list(audit_archive.archived_rows([org.pk]))


def test_archives_older_than_the_retention_are_deleted(
    org: Organization, archive_root: Path
) -> None:
    audit_on(dt.date(2020, 3, 1), org, 1)  # more than 5 years before NOW's month
    audit_on(dt.date(2021, 7, 1), org, 1)  # less than 5 years
    with time_machine.travel(dt.datetime(2021, 9, 1, tzinfo=dt.UTC), tick=False):
        audit_archive.archive_due()
    with time_machine.travel(NOW, tick=False):
        report = audit_archive.archive_due()
    assert report.expired_files == 2  # the 2020 day's file and manifest
    remaining = sorted(p.name for p in archive_root.rglob("*.ndjson.gz"))
    assert remaining == ["audit-2021-07-01.ndjson.gz"]


def test_archives_on_an_s3_compatible_bucket(
    org: Organization, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    audit_on(OLD_DAY, org, 2)
    audit_on(dt.date(2020, 3, 1), org, 1)
    with s3_server(monkeypatch) as s3:
        settings.STORAGES = {**settings.STORAGES, "archive": s3.storage_config("event-archive")}
        storages._storages.pop("archive", None)  # the handler caches built storages
        try:
            with time_machine.travel(dt.datetime(2021, 9, 1, tzinfo=dt.UTC), tick=False):
                assert audit_archive.archive_due().rows == 1
            with time_machine.travel(NOW, tick=False):
                report = audit_archive.archive_due()
            assert (report.rows, report.expired_files) == (2, 2)
            assert s3.keys() == [
                f"event-archive/audit-log/{org.pk}/2026/02/audit-2026-02-20.manifest.json",
                f"event-archive/audit-log/{org.pk}/2026/02/audit-2026-02-20.ndjson.gz",
            ]
            assert len(list(audit_archive.archived_rows([org.pk]))) == 2
        finally:
            storages._storages.pop("archive", None)
