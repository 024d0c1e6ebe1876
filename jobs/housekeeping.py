"""The core app's scheduled jobs (declared with `jobs.registry.job`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from django.conf import settings

from core import audit_archive, backup, read_only, services, workers
from jobs.registry import job


class RestoreCheckFailed(Exception):
    """The newest backup is missing or does not restore with its manifest's row counts."""


class BackupFailed(Exception):
    """What a backup job must copy is not there."""


@job("idempotency-keys-purge", crontab="45 4 * * *")
def purge_idempotency_keys() -> int:
    """Delete stored Idempotency-Key responses older than API_IDEMPOTENCY_TTL_SECONDS."""
    return services.idempotency_keys_purge(older_than=services.idempotency_expiry_cutoff())


@job("backup", crontab="0 2 * * *")
def run_backup() -> int:
    """Dump the database into the backups storage, then delete copies past the retention."""
    backup.backup_create()
    return len(backup.backup_prune())


@job("restore-check", crontab="0 5 * * 0")
def run_restore_check() -> int:
    """Restore the newest backup into a scratch database and compare its row counts (weekly)."""
    dump = backup.latest_dump()
    if dump is None:
        raise RestoreCheckFailed("no backup found in the backups storage")
    verdict = backup.restore_check_run(dump)
    if not verdict.ok:
        tables = ", ".join(sorted(verdict.mismatches))
        raise RestoreCheckFailed(f"{dump} restores with different row counts in: {tables}")
    restored = sum(verdict.restored.values())
    return restored + _check_waha_sessions()


# WAHA's sessions folder (the paired WhatsApp numbers: losing it means pairing every number again).
WAHA_SESSIONS_PREFIX = "waha-sessions-"


@job("waha-sessions-backup", crontab="30 2 * * 0")
def backup_waha_sessions() -> int:
    """Archive WAHA_SESSIONS_ROOT into the backups storage (weekly, seed 001), then delete
    archives past BACKUP_RETENTION_DAYS (the newest stays); 0 when unset."""
    root = settings.WAHA_SESSIONS_ROOT
    if not root:
        return 0
    if not Path(root).is_dir():
        raise BackupFailed(f"WAHA_SESSIONS_ROOT {root!r} is not a folder")
    backup.folder_backup_create(Path(root), prefix=WAHA_SESSIONS_PREFIX)
    backup.folder_backup_prune(WAHA_SESSIONS_PREFIX)  # the dumps' retention (BACKUP_RETENTION_DAYS)
    return 1


def _check_waha_sessions() -> int:
    """The restore check's part for WAHA's sessions: the newest archive extracts to exactly
    its manifest's files (when WAHA_SESSIONS_ROOT is set)."""
    if not settings.WAHA_SESSIONS_ROOT:
        return 0
    archive = backup.latest_folder_backup(WAHA_SESSIONS_PREFIX)
    if archive is None:
        raise RestoreCheckFailed("no WAHA sessions backup found in the backups storage")
    problems = backup.folder_restore_check(archive)
    if problems:
        raise RestoreCheckFailed(f"{archive} does not restore: {', '.join(problems)}")
    return 1


@job("audit-log-archive", crontab="0 4 * * *")
def archive_audit_log() -> int:
    """Archive audit rows past AUDIT_LOG_HOT_DAYS (gzip NDJSON + manifest), then delete them."""
    return audit_archive.archive_due().rows


@job("workers-purge", every=dt.timedelta(minutes=10))
def purge_workers() -> int:
    """Delete the worker registry's rows of processes stopped more than
    WORKER_KEEP_STOPPED_MINUTES ago, or silent for WORKER_PURGE_AFTER_HOURS."""
    return workers.purge()


@job("read-only-buffer-replay", every=dt.timedelta(minutes=1))
def replay_read_only_buffer() -> int:
    """Replay the requests buffered in read-only mode, oldest first, once it is off."""
    return read_only.replay_buffer().delivered
