"""daily-budget-reset (00:00 America/Sao_Paulo on the crontab's own time zone) and
prune-old-media (attachments past the organization's retention, storage and records)."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django_celery_beat.models import PeriodicTask

from ai.budget import budget_allows, budget_charge, local_today
from ai.media import media_prefix
from ai.models import AiAccount, AiUsageDaily
from core.models import Organization
from crm.models import Message
from jobs.registry import job_run
from jobs.schedules import schedules_install
from tests.support.factories import MessageFactory
from tests.support.storage import use_local_storage

pytestmark = pytest.mark.django_db

SAO_PAULO = zoneinfo.ZoneInfo("America/Sao_Paulo")


def test_the_budget_reset_is_scheduled_at_midnight_in_sao_paulo() -> None:
    schedules_install()
    task = PeriodicTask.objects.get(name="daily-budget-reset")
    assert task.crontab is not None
    assert (task.crontab.minute, task.crontab.hour) == ("0", "0")
    assert str(task.crontab.timezone) == "America/Sao_Paulo"
    prune = PeriodicTask.objects.get(name="prune-old-media")
    assert prune.crontab is not None and str(prune.crontab.timezone) == "UTC"


def test_the_reset_snapshots_yesterday_and_lifts_the_throttle(org: Organization) -> None:
    late_evening = dt.datetime(2026, 12, 1, 23, 30, tzinfo=SAO_PAULO)  # 02:30 UTC on the 2nd
    with time_machine.travel(late_evening, tick=False):
        AiAccount.objects.create(organization=org, daily_budget_cents=100, spent_day=local_today())
        budget_charge(org.pk, cost_cents=120.5, tokens_in=900, tokens_out=100)
        assert budget_allows(org.pk) is False
        assert (
            job_run(name="daily-budget-reset", trigger="manual").rows_processed == 0
        )  # same day: nothing
    with time_machine.travel(late_evening + dt.timedelta(hours=1), tick=False):  # 00:30 BRT
        first = job_run(name="daily-budget-reset", trigger="manual")
        again = job_run(name="daily-budget-reset", trigger="manual")
        assert budget_allows(org.pk) is True
    assert (first.rows_processed, again.rows_processed) == (1, 0)
    (usage,) = AiUsageDaily.objects.all()
    assert usage.day == dt.date(2026, 12, 1)
    assert (usage.spent_cents, usage.calls, usage.tokens_in, usage.throttled) == (
        Decimal("120.5"),
        1,
        900,
        True,
    )
    account = AiAccount.objects.get(pk=org.pk)
    assert (account.spent_day, account.spent_cents, account.throttled_at) == (
        dt.date(2026, 12, 2),
        0,
        None,
    )


def test_old_attachments_are_removed_from_storage_and_records(
    org: Organization, settings: Any, tmp_path: Path
) -> None:
    use_local_storage(settings, "default", tmp_path)
    settings.MEDIA_URL = "/media/"
    old_file = default_storage.save(f"{media_prefix(org.pk)}old.jpg", ContentFile(b"old"))
    new_file = default_storage.save(f"{media_prefix(org.pk)}new.jpg", ContentFile(b"new"))
    old = MessageFactory(
        organization=org, media_urls=[f"/media/{old_file}", "https://cdn.example/x.jpg"]
    )
    new = MessageFactory(organization=org, media_urls=[new_file])
    Message.objects.filter(pk=old.pk).update(
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=400)
    )
    run = job_run(name="prune-old-media", trigger="manual")
    assert run.rows_processed == 1
    old.refresh_from_db()
    new.refresh_from_db()
    assert old.media_urls == [] and new.media_urls == [new_file]
    assert not default_storage.exists(old_file) and default_storage.exists(new_file)


def test_media_prune_deletes_nothing_outside_the_organization_s_prefix(
    org: Organization, org_b: Organization, settings: Any, tmp_path: Path, caplog: Any
) -> None:
    """media_urls come from the channel (a tenant's own WAHA): a reference to another
    organization's file, a backup, or a path that climbs out is dropped from the record only."""
    use_local_storage(settings, "default", tmp_path)
    settings.MEDIA_URL = "/media/"
    theirs = default_storage.save(f"{media_prefix(org_b.pk)}b.jpg", ContentFile(b"b"))
    backup = default_storage.save("backups/db.dump", ContentFile(b"dump"))
    mine = default_storage.save(f"{media_prefix(org.pk)}a.jpg", ContentFile(b"a"))
    hostile = [
        theirs,
        f"/media/{backup}",
        f"{media_prefix(org.pk)}../{org_b.pk}/b.jpg",
        f"/{media_prefix(org.pk)}a.jpg",
        "../outside.txt",
    ]
    message = MessageFactory(organization=org, media_urls=[*hostile, mine])
    Message.objects.filter(pk=message.pk).update(
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=400)
    )
    with caplog.at_level("WARNING", logger="ai.media"):
        assert job_run(name="prune-old-media", trigger="manual").rows_processed == 1
    message.refresh_from_db()
    assert message.media_urls == []
    assert default_storage.exists(theirs) and default_storage.exists(backup)
    assert not default_storage.exists(mine)
    warned = [r for r in caplog.records if "outside the organization" in r.getMessage()]
    assert len(warned) == len(hostile)


def test_an_organization_s_own_retention_wins(org: Organization, org_b: Organization) -> None:
    AiAccount.objects.create(
        organization=org, daily_budget_cents=1, spent_day=local_today(), media_retention_days=30
    )
    mine = MessageFactory(organization=org, media_urls=["https://cdn.example/a.jpg"])
    theirs = MessageFactory(organization=org_b, media_urls=["https://cdn.example/b.jpg"])
    Message.objects.filter(pk__in=[mine.pk, theirs.pk]).update(
        created_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=60)
    )
    assert job_run(name="prune-old-media", trigger="manual").rows_processed == 1
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.media_urls == [] and theirs.media_urls == ["https://cdn.example/b.jpg"]
