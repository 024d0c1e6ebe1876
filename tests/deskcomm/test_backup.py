"""`backup` and `restore_check` for real: pg_dump/pg_restore against the test database."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import override_settings

import eventbus
from deskcomm import backup, pg_tools
from deskcomm.models import Organization

pytestmark = pytest.mark.slow


@pytest.fixture
def backup_dir(tmp_path: Path) -> Path:
    """The backups storage, in a temporary directory for this test."""
    config = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": tmp_path},
    }
    from django.conf import settings

    with override_settings(STORAGES={**settings.STORAGES, "backups": config}):
        storages._storages.pop("backups", None)  # the handler caches built storages
        yield tmp_path
    storages._storages.pop("backups", None)


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
    assert "deskcomm_organization: dump 1, restored 1 ok" in output
    assert not scratch_exists()


@pytest.mark.django_db(transaction=True)
def test_a_tampered_manifest_fails_the_check(org: Organization, backup_dir: Path) -> None:
    run("backup")
    (manifest,) = backup_dir.glob("*.json")
    manifest.write_text(
        manifest.read_text().replace('"deskcomm_organization": 1', '"deskcomm_organization": 7')
    )
    with pytest.raises(CommandError, match="RESTORE CHECK FAILED"):
        run("restore_check")
    assert not scratch_exists()


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
