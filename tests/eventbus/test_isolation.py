"""Failure isolation with real `drain_events` subprocesses and real signals (R-F1, docs/workers.md).

No delivery pays for another's failure: a handler that kills its worker dies alone, a slow one
delays only itself, a hung one times out, a worker stopped past its lease starts nothing of the
batch taken from it, a killed worker's claim is back within the lease plus a few seconds, and a
database restart charges nothing to handlers that had not started.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
import uuid

import dramatiq
import pytest
from django.db import connections
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery, DeliveryAttempt
from tests.support import pgserver
from tests.support.db import side_effect_rows
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

LEASE = 2.0  # seconds: short leases keep these tests quick (the default is 30)
FAST = {
    "EVENTBUS_LEASE_SECONDS": str(LEASE),
    "EVENTBUS_RETRY_SCHEDULE": "0.1",
    "EVENTBUS_RETRY_JITTER": "0",
}
LOOP = ["--no-listen", "--poll-interval", "0.1", "--batch-size", "100"]


def emit(org: Organization, event_type: str, payloads: list[dict[str, object]]) -> list[uuid.UUID]:
    return list(
        eventbus.emit_many(
            [
                {"event_type": event_type, "entity_kind": "thing", "payload": {"n": i, **p}}
                for i, p in enumerate(payloads)
            ],
            organization=org,
        )
    )


def started(drain: Drain, processes: list[Drain]) -> Drain:
    processes.append(drain)
    wait_for(lambda: "started" in drain.output(), timeout=60, what=drain.output)
    return drain


def deliveries(consumer: str, **filters: object) -> list[Delivery]:
    return list(Delivery.objects.filter(consumer=consumer, **filters).order_by("id"))


def test_a_handler_that_kills_its_worker_dies_alone_and_takes_no_neighbour_with_it(
    org: Organization, org_b: Organization, side_effects: None, processes: list[Drain]
) -> None:
    [poison] = emit(org, "test.poison", [{"poison": True}])
    innocent = emit(org_b, "test.poison", [{} for _ in range(50)])
    args = ["--consumer", "poison-worker", *LOOP]
    drain = start_drain(*args, **FAST)
    processes.append(drain)
    deaths = 0

    def settled() -> bool:
        nonlocal drain, deaths
        if drain.poll() is not None:  # killed by the poison: restart it, as a supervisor would
            assert drain.returncode == -signal.SIGKILL, drain.output()
            deaths += 1
            drain = start_drain(*args, **FAST)
            processes.append(drain)
        return not Delivery.objects.filter(status__in=["pending", "processing"]).exists()

    wait_for(settled, timeout=180, what=lambda: f"every delivery settled ({deaths} deaths)")

    dead = Delivery.objects.get(event_id=poison)
    assert (dead.status, dead.attempts, dead.error_class) == ("dead", 3, "LeaseExpired")
    assert dead.redelivered
    # One death with the whole batch claimed (nobody charged), then three running alone.
    assert deaths == 4
    others = Delivery.objects.filter(event_id__in=innocent)
    assert set(others.values_list("status", "attempts")) == {("done", 1)}  # nothing charged
    assert not DeliveryAttempt.objects.filter(delivery__in=others).exists()
    runs = {event: n for event, _, n in side_effect_rows()}
    assert runs == {str(event): 1 for event in innocent}  # each ran (committed) exactly once


def test_a_slow_handler_delays_only_itself(
    org: Organization, org_b: Organization, side_effects: None, processes: list[Drain]
) -> None:
    args = ["--consumer", "hol-worker", "--concurrency", "1", *LOOP]
    for _ in range(2):
        started(start_drain(*args), processes)
    emitted_at = timezone.now()
    [slow] = emit(org, "test.hol", [{"seconds": 15}])
    quick = emit(org_b, "test.hol", [{} for _ in range(20)])

    def quick_done() -> bool:
        return Delivery.objects.filter(event_id__in=quick, status="done").count() == 20

    wait_for(quick_done, timeout=30, what="the quick deliveries")
    finished = Delivery.objects.filter(event_id__in=quick).values_list("finished_at", flat=True)
    # Well under the slow handler's 15 s (not a latency target: a loaded machine may take a
    # few seconds), so none of them waited behind it; and the slow one is still running.
    assert max(finished) - emitted_at < dt.timedelta(seconds=10)
    assert Delivery.objects.get(event_id=slow).status == "processing"  # still running


def test_a_handler_that_never_returns_times_out_and_the_worker_goes_on(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    [hung] = emit(org, "test.hang", [{"hang": True}])
    first = emit(org, "test.hang", [{} for _ in range(5)])
    drain = started(
        start_drain("--consumer", "hang-worker", "--concurrency", "1", *LOOP, **FAST), processes
    )

    def hung_dead() -> bool:
        return Delivery.objects.filter(event_id=hung, status="dead").exists()

    wait_for(hung_dead, timeout=60, what=drain.output)
    later = emit(org, "test.hang", [{} for _ in range(5)])  # the slot is free again
    wait_for(
        lambda: Delivery.objects.filter(event_id__in=[*first, *later], status="done").count() == 10,
        timeout=30,
        what=drain.output,
    )
    assert drain.poll() is None  # still draining
    dead = Delivery.objects.get(event_id=hung)
    assert (dead.attempts, dead.error_class) == (2, "HandlerTimeout")
    assert list(
        DeliveryAttempt.objects.filter(delivery=dead)
        .order_by("attempt")
        .values_list("outcome", "error_class")
    ) == [("retry", "HandlerTimeout"), ("dead", "HandlerTimeout")]
    assert "giving up on it" in drain.output()


def test_a_killed_workers_claim_is_taken_over_within_the_lease_plus_a_few_seconds(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    lease = {"EVENTBUS_LEASE_SECONDS": "4"}
    args = ["--consumer", "hol-worker", "--concurrency", "1", *LOOP]
    first = started(start_drain(*args, **lease), processes)
    ids = emit(org, "test.hol", [{"seconds": 0.5} for _ in range(10)])
    wait_for(lambda: len(side_effect_rows()) >= 1, timeout=30, what=first.output)
    first.send_signal(signal.SIGKILL)  # mid-batch: one handler running, the rest queued
    killed_at = time.monotonic()
    first.wait(timeout=10)
    held = Delivery.objects.filter(event_id__in=ids, status="processing").count()
    assert held >= 2  # several: none is charged
    second = started(start_drain(*args, **lease), processes)  # the reaper on its default schedule
    running_at = time.monotonic()

    def taken_over() -> bool:
        rows = Delivery.objects.filter(event_id__in=ids, status="processing")
        return not rows.filter(locked_by__endswith=f":{first.pid}").exists()

    wait_for(taken_over, timeout=30, what=second.output)
    # Within a few seconds of the lease's end, or of the second worker's start when it came up
    # later: its start-up (a Django process on a busy machine) is not the bus's to bound.
    assert time.monotonic() - max(killed_at + 4, running_at) < 5
    wait_for(
        lambda: Delivery.objects.filter(event_id__in=ids, status="done").count() == 10,
        timeout=60,
        what=second.output,
    )
    assert set(Delivery.objects.filter(event_id__in=ids).values_list("attempts", flat=True)) == {
        1
    }  # the killed worker held several: none was charged
    assert Delivery.objects.filter(event_id__in=ids, redelivered=True).count() == held


def test_a_worker_stopped_past_its_lease_starts_nothing_of_the_batch_taken_from_it(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    args = ["--consumer", "hol-worker", "--concurrency", "1", *LOOP]
    stale = started(start_drain(*args, **FAST), processes)
    ids = emit(org, "test.hol", [{"seconds": 0.2} for _ in range(20)])
    wait_for(lambda: len(side_effect_rows()) >= 2, timeout=30, what=stale.output)
    stale.send_signal(signal.SIGSTOP)
    try:
        started_by_stale = _starts_by(stale.pid)
        fresh = started(start_drain(*args, **FAST), processes)  # reaps after the lease ran out
        wait_for(
            lambda: Delivery.objects.filter(event_id__in=ids, status="done").count() == 20,
            timeout=60,
            what=fresh.output,
        )
    finally:
        stale.send_signal(signal.SIGCONT)
    wait_for(lambda: "lost the lease" in stale.output(), timeout=30, what=stale.output)
    assert _starts_by(stale.pid) == started_by_stale  # nothing started after resuming
    assert stale.output().count("lost the lease") == 1
    assert stale.poll() is None


def _starts_by(pid: int | None) -> int:
    return sum(1 for _ in _side_effect_pids() if _ == pid)


def _side_effect_pids() -> list[int]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM test_side_effect")
        return [row[0] for row in cursor.fetchall()]


@pytest.mark.exclusive  # the restart cuts every worker's connections
def test_a_database_restart_charges_nothing_and_loses_nothing(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    server = pgserver.embedded_test_server()
    if server is None:
        pytest.skip("needs the embedded test server (DATABASE_URL points at another server)")
    args = ["--consumer", "hol-worker", "--concurrency", "4", *LOOP]
    drains = [started(start_drain(*args), processes) for _ in range(2)]
    ids = emit(org, "test.hol", [{"seconds": 0.02} for _ in range(600)])
    wait_for(lambda: len(side_effect_rows()) >= 60, timeout=60, what=drains[0].output)
    try:
        server.restart()
    finally:  # reconnect even after a failed restart: the tests after this one need it
        connections.close_all()
        pgserver.reset_pools(dramatiq.get_broker())

    def all_done() -> bool:
        return Delivery.objects.filter(event_id__in=ids, status="done").count() == 600

    wait_for(all_done, timeout=120, what=lambda: drains[0].output() + drains[1].output())
    assert set(Delivery.objects.filter(event_id__in=ids).values_list("attempts", flat=True)) == {1}
    assert not DeliveryAttempt.objects.exists()  # no failed attempt recorded for anyone
    assert all("database error" in d.output() for d in drains)  # both lived through it
    assert all(d.poll() is None for d in drains)


def test_a_worker_with_too_many_abandoned_threads_exits_75(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    """The supervisor's signal to start a clean process (docs/workers.md): the command's exit
    code is the runner's, not 0."""
    emit(org, "test.hang", [{"hang": True}])
    drain = start_drain(
        "--consumer", "hang-worker", *LOOP, **FAST, EVENTBUS_MAX_ABANDONED_THREADS="1"
    )
    processes.append(drain)
    wait_for(lambda: drain.poll() is not None, timeout=60, what=drain.output)
    assert drain.returncode == 75, drain.output()
    assert "too many abandoned handler threads" in drain.output()
