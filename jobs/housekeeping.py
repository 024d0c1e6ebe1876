"""The core app's scheduled jobs (declared with `jobs.registry.job`)."""

from __future__ import annotations

from core import audit_archive, backup, services
from jobs.registry import job


class RestoreCheckFailed(Exception):
    """The newest backup is missing or does not restore with its manifest's row counts."""


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
    return sum(verdict.restored.values())


@job("audit-log-archive", crontab="0 4 * * *")
def archive_audit_log() -> int:
    """Archive audit rows past AUDIT_LOG_HOT_DAYS (gzip NDJSON + manifest), then delete them."""
    return audit_archive.archive_due().rows
