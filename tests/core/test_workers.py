"""The worker registry: register, beat, stop; alive, stale and stopped as the console says."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
import time_machine
from django.test import override_settings
from django.utils import timezone

from core import workers
from core.models import WorkerProcess
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
