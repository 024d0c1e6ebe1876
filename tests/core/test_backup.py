"""`backup` and `restore_check` for real: pg_dump/pg_restore against the test database."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import override_settings

import eventbus
from core import backup, pg_tools
from core.backup import restorable_listing
from core.models import Organization
from jobs.models import JobRun
from jobs.registry import job_run
from tests.support.db import as_superuser
from tests.support.s3 import S3Server, s3_server

pytestmark = pytest.mark.slow


@contextmanager
def use_backups_storage(config: dict[str, Any]) -> Iterator[None]:
    with override_settings(STORAGES={**settings.STORAGES, "backups": config}):
        storages._storages.pop("backups", None)  # the handler caches built storages
        yield
    storages._storages.pop("backups", None)


@pytest.fixture
def backup_dir(tmp_path: Path) -> Iterator[Path]:
    """The backups storage exactly as settings.py defines it, only in a temporary directory."""
    default = settings.STORAGES["backups"]  # no test adds the alias: settings.py must have it
    assert default["BACKEND"] == "django.core.files.storage.FileSystemStorage"
    config = {**default, "OPTIONS": {**default["OPTIONS"], "location": tmp_path}}
    with use_backups_storage(config):
        yield tmp_path


@pytest.fixture
def backup_bucket(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Server]:
    """The backups storage on an S3-compatible server on loopback (BACKUP_S3_BUCKET's shape)."""
    with s3_server(monkeypatch) as s3, use_backups_storage(s3.storage_config(prefix="backups")):
        yield s3


def made_days_ago(make: Callable[[], object]) -> dt.datetime:
    """`make()` 45, 31 and 10 days ago (around the 30 days of BACKUP_RETENTION_DAYS); now."""
    now = dt.datetime.now(tz=dt.UTC)
    for days_ago in (45, 31, 10):
        with time_machine.travel(now - dt.timedelta(days=days_ago)):
            make()
    return now


def run(command: str) -> str:
    out = StringIO()
    call_command(command, stdout=out)
    return out.getvalue()


def scratch_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s",
            [f"{connection.settings_dict['NAME']}_restore_check"],
        )
        return cursor.fetchone() is not None


@pytest.mark.django_db(transaction=True)
def test_backup_then_restore_check_passes(org: Organization, backup_dir: Path) -> None:
    for i in range(5):
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": i})
    organizations = Organization.objects.count()  # the system one too, unless a flush removed it
    written = run("backup")
    dumps = sorted(p.name for p in backup_dir.iterdir())
    assert len(dumps) == 2 and dumps[0].endswith(".dump") and dumps[1].endswith(".json")
    assert dumps[0] in written
    # Writes after the backup do not change what the dump holds.
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 99})
    output = run("restore_check")
    assert "RESTORE CHECK PASSED" in output
    assert "event_log: dump 5, restored 5 ok" in output
    assert "eventbus_delivery: dump 15, restored 15 ok" in output
    assert f"deskcomm_organization: dump {organizations}, restored {organizations} ok" in output
    assert not scratch_exists()


@pytest.mark.django_db(transaction=True)
def test_a_monitoring_extension_in_the_database_does_not_fail_the_check(
    org: Organization, backup_dir: Path
) -> None:
    """pg_stat_statements, added by a superuser for the slow-queries view, is in the dump; the
    check restores as the application role, which may not create it, and leaves it out."""
    as_superuser("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    try:
        eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
        run("backup")
        output = run("restore_check")
        assert "RESTORE CHECK PASSED" in output
        assert "event_log: dump 1, restored 1 ok" in output
    finally:
        as_superuser("DROP EXTENSION IF EXISTS pg_stat_statements")
    assert not scratch_exists()


def test_the_restorable_listing_leaves_out_only_the_monitoring_extensions() -> None:
    toc = (
        ";\n; Archive created at 2026-12-06\n"
        "3; 3079 16385 EXTENSION - pg_stat_statements \n"
        "4420; 0 0 COMMENT - EXTENSION pg_stat_statements \n"
        "2; 3079 16390 EXTENSION - vector \n"
        "230; 1259 16500 TABLE public deskcomm_contact deskcomm\n"
    )
    assert restorable_listing(toc) == (
        ";\n; Archive created at 2026-12-06\n"
        "2; 3079 16390 EXTENSION - vector \n"
        "230; 1259 16500 TABLE public deskcomm_contact deskcomm\n"
    )


@pytest.mark.django_db(transaction=True)
def test_a_tampered_manifest_fails_the_check(org: Organization, backup_dir: Path) -> None:
    run("backup")
    (manifest,) = backup_dir.glob("*.json")
    manifest.write_text(
        manifest.read_text().replace('"deskcomm_organization": ', '"deskcomm_organization": 7')
    )
    with pytest.raises(CommandError, match="RESTORE CHECK FAILED"):
        run("restore_check")
    assert not scratch_exists()


@pytest.mark.django_db(transaction=True)
def test_backup_and_restore_check_through_an_s3_compatible_bucket(
    org: Organization, backup_bucket: S3Server
) -> None:
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    written = run("backup").split()[-1]
    assert backup_bucket.keys() == [f"backups/{written}", f"backups/{written[:-5]}.json"]
    output = run("restore_check")
    assert "RESTORE CHECK PASSED" in output and "event_log: dump 1, restored 1 ok" in output
    assert not scratch_exists()


@pytest.mark.django_db(transaction=True)
def test_the_backup_job_prunes_copies_past_the_retention(
    org: Organization, backup_bucket: S3Server
) -> None:
    now = made_days_ago(backup.backup_create)
    assert len(backup.complete_dumps()) == 3

    result = job_run(name="backup", trigger="test")

    assert result.status == "completed" and result.rows_processed == 2  # the two past 30 days
    kept = backup.complete_dumps()
    ages = [(now - backup.dump_time(d)) / dt.timedelta(days=1) for d in kept]
    assert [round(age) for age in ages] == [10, 0]  # the one taken 10 days ago, and today's
    assert len(backup_bucket.keys()) == 4  # each kept dump with its manifest
    assert job_run(name="restore-check", trigger="test").status == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_failing_restore_check_job_fails_and_alerts(
    org: Organization, backup_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run("backup")
    (manifest,) = backup_dir.glob("*.json")
    manifest.write_text(manifest.read_text().replace('"event_log": ', '"event_log": 7'))
    result = job_run(name="restore-check", trigger="test")
    assert result.status == "failed" and "RestoreCheckFailed" in result.error
    assert JobRun.objects.get(pk=result.run_id).status == "failed"
    assert "ALERT: cron job restore-check failed" in caplog.text


def test_retention_never_deletes_the_newest_copy(backup_dir: Path) -> None:
    old = f"{backup.PREFIX}20200101T000000000000Z"
    (backup_dir / f"{old}.dump").write_bytes(b"dump")
    (backup_dir / f"{old}.json").write_text("{}")
    assert backup.backup_prune() == []
    assert backup.latest_dump() == f"{old}.dump"


@pytest.mark.django_db
def test_restore_check_without_a_backup_is_a_clear_error(backup_dir: Path) -> None:
    with pytest.raises(CommandError, match="no backup found"):
        run("restore_check")


def test_tools_older_than_the_server_are_refused() -> None:
    with pytest.raises(pg_tools.ToolsNotFound, match="PostgreSQL 99 .*PG_BIN_DIR"):
        pg_tools.tools_for(99)


def test_the_oldest_new_enough_tools_are_chosen() -> None:
    assert backup.tools_for(15) == min(
        (d for d in pg_tools._candidates() if (pg_tools._major(d) or 0) >= 15),
        key=lambda d: pg_tools._major(d) or 0,
    )


@pytest.fixture
def waha_sessions(tmp_path: Path, settings: Any) -> Path:
    """A WAHA sessions folder (what compose mounts at /data/waha-sessions), with a subfolder."""
    root = tmp_path / "waha-sessions"
    (root / "default").mkdir(parents=True)
    (root / "default" / "creds.json").write_text('{"me": "5511999990000"}')
    (root / "default" / "keys.bin").write_bytes(bytes(range(256)) * 4)
    settings.WAHA_SESSIONS_ROOT = str(root)
    return root


@pytest.mark.django_db(transaction=True)
def test_waha_sessions_are_backed_up_weekly_and_verified_by_the_restore_check(
    org: Organization, backup_dir: Path, waha_sessions: Path
) -> None:
    """Seed 001: the sessions folder in the backups; the restore check extracts the newest
    archive and compares every file with its manifest."""
    from jobs.registry import jobs

    assert jobs.get("waha-sessions-backup").crontab == "30 2 * * 0"  # weekly
    assert job_run(name="waha-sessions-backup", trigger="test").status == "completed"
    (archive,) = backup_dir.glob("waha-sessions-*.tar.gz")
    assert backup.folder_restore_check(archive.name) == []
    # A later session change does not alter what the archive holds.
    (waha_sessions / "default" / "creds.json").write_text("{}")
    run("backup")
    assert job_run(name="restore-check", trigger="test").status == "completed"
    # The restore check fails on an archive that does not hold what its manifest says.
    (manifest,) = backup_dir.glob("waha-sessions-*.json")
    manifest.write_text(
        manifest.read_text().replace('"default/keys.bin": "', '"default/keys.bin": "0')
    )
    assert backup.folder_restore_check(archive.name) == ["different: default/keys.bin"]
    failed = job_run(name="restore-check", trigger="test")
    assert failed.status == "failed" and "default/keys.bin" in failed.error


@pytest.mark.django_db(transaction=True)
def test_a_restore_check_with_waha_but_no_sessions_backup_fails(
    org: Organization, backup_dir: Path, waha_sessions: Path
) -> None:
    run("backup")
    failed = job_run(name="restore-check", trigger="test")
    assert failed.status == "failed" and "no WAHA sessions backup" in failed.error


@pytest.mark.django_db
def test_without_waha_the_sessions_job_backs_up_nothing(backup_dir: Path, settings: Any) -> None:
    settings.WAHA_SESSIONS_ROOT = ""
    result = job_run(name="waha-sessions-backup", trigger="test")
    assert result.status == "completed" and result.rows_processed == 0
    assert list(backup_dir.iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_waha_sessions_archives_past_the_retention_are_deleted(
    backup_dir: Path, waha_sessions: Path
) -> None:
    made_days_ago(lambda: backup.folder_backup_create(waha_sessions, prefix="waha-sessions-"))
    assert job_run(name="waha-sessions-backup", trigger="test").status == "completed"
    kept = backup.folder_backups("waha-sessions-")
    assert len(kept) == 2 and kept[-1] == backup.latest_folder_backup("waha-sessions-")
    stored = [p for p in backup_dir.iterdir() if p.is_file()]
    assert len(stored) == 4  # each kept archive with its manifest
