"""Redaction reaches the event archives: a subject whose events were archived (and deleted from
the hot tables) leaves no identifier in any archive file, and restoring the day brings back the
scrubbed rows only."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from eventbus.history import archive
from eventbus.store.models import Delivery, EventLog
from lgpd.archives import archives_redact
from lgpd.selectors import subject_for
from tests.lgpd.conftest import NEEDLES, World, drain_lgpd, request_for
from tests.support.storage import use_local_storage
from tests.support.traces import traces
from webhooks.models import Attempt

pytestmark = pytest.mark.django_db


@pytest.fixture
def archive_root(tmp_path: Path, settings: Any) -> Path:
    settings.EVENTBUS = {**settings.EVENTBUS, "ARCHIVE_HOT_DAYS": 1}
    return use_local_storage(settings, "archive", tmp_path / "archive")


def age_the_world() -> None:
    """The world's deliveries finished and the webhook attempt log's retention (30 days, shorter
    than the hot window) ran: the archive job only takes finished days, and it does not archive
    webhooks_attempt rows."""
    Delivery.objects.update(status="done")
    Attempt.objects.all().delete()


def archived_text(root: Path) -> str:
    return "\n".join(gzip.decompress(p.read_bytes()).decode() for p in root.rglob("*.ndjson.gz"))


def found(text: str) -> list[str]:
    return [needle for needle in NEEDLES if needle.lower() in text.lower()]


def test_redaction_rewrites_the_archives_and_a_restore_brings_back_no_identifier(
    world: World, clock: time_machine.Coordinates, archive_root: Path
) -> None:
    day = timezone.now().date()
    age_the_world()
    clock.shift(dt.timedelta(days=2))
    report = archive.archive_due()
    assert report.days == 1 and not EventLog.objects.filter(created_at__date=day).exists()
    assert found(archived_text(archive_root)), "the archive holds the subject before"
    [before] = list(archive_root.rglob("*.ndjson.gz"))

    request_for(world, "redact")
    clock.shift(dt.timedelta(days=15, seconds=1))
    drain_lgpd()

    files = list(archive_root.rglob("*.ndjson.gz"))
    assert len(files) == 1 and files[0] != before and not before.exists()  # old file removed
    assert found(archived_text(archive_root)) == []
    manifest, lines = archive.read_day(archive.archive_storage(), world.org.pk, day)
    assert manifest["rewritten_at"] and len(lines) == manifest["events"] == report.events

    restored = archive.restore_day(world.org.pk, day)
    assert restored.events == report.events
    assert traces(NEEDLES) == []
    # The rows are back (ids kept), only without the subject's data.
    assert EventLog.objects.filter(event_type="contact.created", created_at__date=day).exists()


def test_days_without_the_subject_are_left_alone(
    world: World, clock: time_machine.Coordinates, archive_root: Path
) -> None:
    age_the_world()
    clock.shift(dt.timedelta(days=2))
    archive.archive_due()
    other = subject_for(world.other)  # João: mentioned nowhere in the archived events
    [before] = list(archive_root.rglob("*.ndjson.gz"))
    assert archives_redact(other) == 0
    assert before.exists()
