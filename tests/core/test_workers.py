"""The worker registry: register, beat, stop; alive, stale and stopped as the console says."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import time_machine
from django.test import override_settings
from django.utils import timezone

from core import version, workers
from core.models import AuditLog, WorkerProcess
from jobs.registry import job_run, jobs
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def presence() -> Iterator[workers.Presence]:
    sample = workers.Sample(in_flight=3, last_claim_at=timezone.now(), leader=True)
    p = workers.Presence(kind="drain_events", concurrency=4, pumps="drain", sample=lambda: sample)
    yield p
    p.stop()


def test_a_process_registers_and_beats(presence: workers.Presence) -> None:
    with override_settings(WORKERS={"HEARTBEAT_SECONDS": 60}):
        presence.start()
        wait_for(
            lambda: WorkerProcess.objects.filter(pk=presence.id).exists(),
            timeout=10,
            what="the registration (from the presence thread)",
        )
    row = WorkerProcess.objects.get(pk=presence.id)
    assert (row.kind, row.concurrency, row.in_flight, row.pumps) == ("drain_events", 4, 0, "drain")
    presence.beat()
    row.refresh_from_db()
    assert (row.in_flight, row.leader, row.last_claim_at is not None) == (3, True, True)
    assert state_of(presence) == "alive"


def state_of(presence: workers.Presence, now: dt.datetime | None = None) -> str:
    """The console's state of this process (other tests' in-process workers may be listed too)."""
    [row] = [w for w in workers.workers(now=now) if w.process.id == presence.id]
    return row.state


def test_missed_beats_make_it_stale_and_a_clean_exit_stopped(presence: workers.Presence) -> None:
    with override_settings(WORKERS={"HEARTBEAT_SECONDS": 60}):
        presence.register()
        later = timezone.now() + dt.timedelta(seconds=181)
        assert state_of(presence, now=later) == "stale"
        assert state_of(presence) == "alive"
        presence.stop()
    assert state_of(presence) == "stopped"


def test_very_old_rows_are_purged_by_the_next_registration(presence: workers.Presence) -> None:
    with time_machine.travel(timezone.now() - dt.timedelta(days=2), tick=False):
        old = workers.Presence(kind="run_scheduler")
        old.register()
    presence.register()
    assert not WorkerProcess.objects.filter(pk=old.id).exists()
    assert WorkerProcess.objects.filter(pk=presence.id).exists()


def test_a_process_registers_its_real_version_never_unknown(presence: workers.Presence) -> None:
    presence.register()
    row = WorkerProcess.objects.get(pk=presence.id)
    assert row.version == version.version() and row.version not in ("", "unknown")
    assert row.threads == {}  # a Presence without pumps reports no split


def test_the_version_comes_from_the_deploy_then_the_image_then_git_then_the_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    version.version.cache_clear()
    try:
        monkeypatch.setenv("DESKCOMM_VERSION", "v2.4.1")
        monkeypatch.setenv("GIT_COMMIT", "abc1234")
        assert version.version() == "v2.4.1"
        version.version.cache_clear()
        monkeypatch.setenv("DESKCOMM_VERSION", "latest")  # the compose default says nothing
        assert version.version() == "abc1234"
        version.version.cache_clear()
        monkeypatch.setenv("GIT_COMMIT", "unknown")  # the Dockerfile's default build argument
        assert version.version() == version.git_describe(version.ROOT) != ""
    finally:
        version.version.cache_clear()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "3.1.0"\n')
    assert version.git_describe(tmp_path) == ""  # no .git there
    assert version.project_version(tmp_path) == "3.1.0"
    assert version.project_version(tmp_path / "missing") == "0"


def process_row(kind: str, *, stopped_minutes_ago: float | None) -> WorkerProcess:
    now = timezone.now()
    stopped = (
        None if stopped_minutes_ago is None else now - dt.timedelta(minutes=stopped_minutes_ago)
    )
    return WorkerProcess.objects.create(
        id=f"host:{kind}:{stopped_minutes_ago}",
        kind=kind,
        host="host",
        pid=1,
        started_at=now - dt.timedelta(hours=2),
        heartbeat_at=stopped or now,
        stopped_at=stopped,
    )


def test_stopped_rows_go_after_a_while_and_the_job_purges_them() -> None:
    old = process_row("deliver_webhooks", stopped_minutes_ago=61)
    recent = process_row("deliver_webhooks", stopped_minutes_ago=5)
    alive = process_row("drain_events", stopped_minutes_ago=None)
    assert jobs.get("workers-purge").every == dt.timedelta(minutes=10)
    result = job_run(name="workers-purge", trigger="test")
    assert (result.status, result.rows_processed) == ("completed", 1)
    assert set(WorkerProcess.objects.values_list("pk", flat=True)) == {recent.pk, alive.pk}
    assert not WorkerProcess.objects.filter(pk=old.pk).exists()


def test_quiet_then_stop_reach_the_process_once_each_on_its_beats_audited(
    presence: workers.Presence,
) -> None:
    heard: list[str] = []
    presence.on_command = heard.append
    presence.register()
    presence.beat()
    assert heard == []
    asked = workers.ask(presence.id, "quiet", actor="user:ops", reason="draining the host")
    assert (asked.command, asked.command_by, asked.command_at is not None) == (
        "quiet",
        "user:ops",
        True,
    )
    with pytest.raises(workers.NotAsked):
        workers.ask(presence.id, "quiet", actor="user:ops")  # asked already
    presence.beat()
    presence.beat()
    assert heard == ["quiet"]
    workers.ask(presence.id, "stop", actor="user:ops")
    with pytest.raises(workers.NotAsked):
        workers.ask(presence.id, "quiet", actor="user:ops")  # a stop is never undone
    presence.beat()
    assert heard == ["quiet", "stop"]
    entries = AuditLog.objects.filter(target_id=presence.id).order_by("id")
    assert [(e.action, e.actor, e.details["kind"]) for e in entries] == [
        ("worker.quiet", "user:ops", "drain_events"),
        ("worker.stop", "user:ops", "drain_events"),
    ]
    assert entries[0].reason == "draining the host"
    presence.stop()
    with pytest.raises(workers.NotAsked):
        workers.ask(presence.id, "stop", actor="user:ops")  # not alive any more
    with pytest.raises(workers.NotAsked):
        workers.ask("no-such-host:1:abcdef", "quiet", actor="user:ops")
    with pytest.raises(workers.NotAsked):
        workers.ask(presence.id, "restart", actor="user:ops")
