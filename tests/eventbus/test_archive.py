"""Retention (R-E6) with controlled time: files and manifests, deletion, re-runs, restore."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import uuid
from io import StringIO
from pathlib import Path

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.retry import Verdict
from eventbus.history import archive
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from jobs.registry import job_run
from tests.support.storage import use_local_storage

pytestmark = pytest.mark.django_db

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
OLD_DAYS = [dt.date(2026, 2, 20), dt.date(2026, 2, 21)]  # more than 90 days before NOW


@pytest.fixture
def archive_root(tmp_path: Path, settings: object) -> Path:
    return use_local_storage(settings, "archive", tmp_path)


def emit_on(day: dt.date, org: Organization, n: int) -> list[uuid.UUID]:
    with time_machine.travel(dt.datetime.combine(day, dt.time(10), tzinfo=dt.UTC), tick=False):
        return eventbus.emit_many(
            [
                {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": i}}
                for i in range(n)
            ],
            organization=org,
        )


def finish_all(with_dead: uuid.UUID | None = None) -> None:
    """Settle every delivery (one of them dead, with an attempt in its history)."""
    if with_dead is not None:
        batch = claims.claim(consumers=["effect-a-worker"], batch_size=100, worker_id="w")
        dead = [e.delivery_id for e in batch.events if e.id == with_dead]
        claims.nack(batch.token, [claims.Failure(dead[0], Verdict(True, 0, "Boom", "Boom: no"))])
        claims.release(batch.token, [e.delivery_id for e in batch.events if e.id != with_dead])
    Delivery.objects.exclude(status="dead").update(status="done")


@pytest.fixture
def old_events(org: Organization, org_b: Organization) -> dict[str, list[uuid.UUID]]:
    created = {
        "a1": emit_on(OLD_DAYS[0], org, 3),
        "a2": emit_on(OLD_DAYS[1], org, 2),
        "b1": emit_on(OLD_DAYS[0], org_b, 1),
        "recent": emit_on(NOW.date(), org, 1),
    }
    finish_all(with_dead=created["a1"][0])
    return created


def run_archive() -> archive.ArchiveReport:
    with time_machine.travel(NOW, tick=False):
        return archive.archive_due()


def test_old_days_become_verified_files_and_leave_the_hot_tables(
    archive_root: Path, org: Organization, old_events: dict[str, list[uuid.UUID]]
) -> None:
    report = run_archive()
    assert (report.days, report.events, report.skipped) == (3, 6, 0)

    data_name, manifest_name = archive.paths(org.pk, OLD_DAYS[0])
    data = (archive_root / data_name).read_bytes()
    manifest = json.loads((archive_root / manifest_name).read_text())
    assert manifest["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["bytes"] == len(data)
    assert (manifest["events"], manifest["deliveries"], manifest["attempts"]) == (3, 9, 1)
    assert manifest["organization_id"] == str(org.pk) and manifest["day"] == "2026-02-20"
    lines = [json.loads(line) for line in gzip.decompress(data).decode().splitlines()]
    assert sorted(line["event"]["id"] for line in lines) == sorted(map(str, old_events["a1"]))
    dead = [d for line in lines for d in line["deliveries"] if d["status"] == "dead"]
    assert [a["error"] for a in dead[0]["attempt_log"]] == ["Boom: no"]

    assert not EventLog.objects.exclude(pk__in=old_events["recent"]).exists()
    assert Delivery.objects.count() == 3 and DeliveryAttempt.objects.count() == 0
    assert EventLog.objects.filter(pk__in=old_events["recent"]).count() == 1


def test_a_rerun_is_a_no_op(archive_root: Path, old_events: dict[str, list[uuid.UUID]]) -> None:
    run_archive()
    files = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in archive_root.rglob("*.*")}
    assert len(files) == 6  # three days, a file and a manifest each
    assert (run_archive().days, run_archive().events) == (0, 0)
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in archive_root.rglob("*.*")} == files


def test_a_day_with_unfinished_deliveries_waits(
    archive_root: Path, org: Organization, old_events: dict[str, list[uuid.UUID]]
) -> None:
    Delivery.objects.filter(event_id=old_events["a2"][0]).update(status="pending")
    report = run_archive()
    assert (report.days, report.skipped) == (2, 1)
    assert EventLog.objects.filter(pk__in=old_events["a2"]).count() == 2
    assert not (archive_root / archive.paths(org.pk, OLD_DAYS[1])[0]).exists()


def test_restore_brings_the_rows_back_and_can_replay_to_a_consumer(
    archive_root: Path, org: Organization, old_events: dict[str, list[uuid.UUID]]
) -> None:
    before = {
        d.id: (d.consumer, d.status, d.attempts)
        for d in Delivery.objects.filter(event_id__in=old_events["a1"])
    }
    run_archive()

    report = archive.restore_day(org.pk, OLD_DAYS[0])
    assert (report.events, report.deliveries, report.attempts, report.replayed) == (3, 9, 1, 0)
    after = {
        d.id: (d.consumer, d.status, d.attempts)
        for d in Delivery.objects.filter(event_id__in=old_events["a1"])
    }
    assert after == before
    assert archive.restore_day(org.pk, OLD_DAYS[0]).events == 0  # already there: kept as is

    replay = archive.restore_day(org.pk, OLD_DAYS[0], replay_to="effect-a-worker")
    assert replay.replayed == 3
    replayed = Delivery.objects.filter(event_id__in=old_events["a1"], consumer="effect-a-worker")
    assert set(replayed.values_list("status", "attempts")) == {("pending", 0)}
    assert set(
        EventLog.objects.filter(pk__in=old_events["a1"]).values_list("status", flat=True)
    ) == {"processing"}
    assert run_archive().skipped == 1  # replay still running: the restored day waits
    Delivery.objects.update(status="done")
    assert run_archive().events == 3  # archived already: only the hot rows go


def test_a_tampered_archive_is_refused(
    archive_root: Path, org: Organization, old_events: dict[str, list[uuid.UUID]]
) -> None:
    run_archive()
    data_path = archive_root / archive.paths(org.pk, OLD_DAYS[0])[0]
    data_path.write_bytes(gzip.compress(b'{"event": {}}\n'))
    with pytest.raises(archive.ArchiveError, match="SHA-256"):
        archive.restore_day(org.pk, OLD_DAYS[0])
    assert not EventLog.objects.filter(pk__in=old_events["a1"]).exists()


def test_restore_refuses_an_organization_that_is_gone(
    archive_root: Path, org: Organization, old_events: dict[str, list[uuid.UUID]]
) -> None:
    run_archive()
    org_id = org.pk
    org.delete()
    with pytest.raises(archive.ArchiveError, match=f"organization {org_id} does not exist"):
        archive.restore_day(org_id, OLD_DAYS[0])
    assert not EventLog.objects.filter(organization_id=org_id).exists()
    assert not Delivery.objects.filter(organization_id=org_id).exists()


def test_restore_archive_command(
    archive_root: Path, org: Organization, old_events: dict[str, list[uuid.UUID]]
) -> None:
    run_archive()
    out = StringIO()
    call_command(
        "restore_archive",
        "--organization",
        str(org.pk),
        "--day",
        "2026-02-20",
        "--until",
        "2026-02-21",
        stdout=out,
    )
    assert "2026-02-20: restored 3 events" in out.getvalue()
    assert "2026-02-21: restored 2 events" in out.getvalue()
    for args, message in [
        (["--organization", "nope", "--day", "2026-02-20"], "must be a UUID"),
        (["--organization", str(org.pk), "--day", "20/02/2026"], "YYYY-MM-DD"),
        (["--organization", str(org.pk), "--day", "2026-02-22", "--until", "2026-02-21"], "until"),
        (["--organization", str(org.pk), "--day", "2025-01-01"], "no archive"),
        (["--organization", str(org.pk), "--day", "2026-02-20", "--replay-to", "x"], "unknown"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("restore_archive", *args)


def test_the_archive_job_records_the_rows_it_archived(
    archive_root: Path, old_events: dict[str, list[uuid.UUID]]
) -> None:
    with time_machine.travel(NOW, tick=False):
        result = job_run(name="event-log-archive", trigger="manual")
    assert result.status == "completed" and result.rows_processed == 6
    completed = EventLog.objects.get(event_type="cron.completed", entity_id=result.run_id)
    assert completed.payload["rows_processed"] == 6
    assert timezone.now() > NOW  # time travel ended
