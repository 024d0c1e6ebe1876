"""Slots: a job can neither kill a slot thread nor hold it past its timeout (no database)."""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from eventbus.dispatch.drain import DrainPump
from eventbus.dispatch.slots import GROW_BELOW_SHARE, Job, Leases, SlotPool, should_grow
from eventbus.dispatch.slotted import SlottedPump
from eventbus.store import metrics
from eventbus.store.event import Event
from webhooks.worker import WebhookPump, WebhookWorkerOptions

TOKEN = uuid.uuid4()


def job(n: int, *, timeout: float = 30.0, lane: str | None = None) -> Job:
    event = Event(
        id=uuid.uuid4(),
        organization_id=uuid.uuid4(),
        event_type="test.job",
        entity_kind="t",
        entity_id=None,
        payload={"n": n},
        metadata={},
        created_at=dt.datetime.now(dt.UTC),
        consumer="slot-worker",
        delivery_id=n,
    )
    return Job(TOKEN, event, timeout, lane)


class Harness:
    """A pool whose jobs run `behaviour[n]` (default: return n), results as (n, outcome)."""

    def __init__(self, size: int, **options: object) -> None:
        self.release = threading.Event()
        self.progress = threading.Event()
        self.behaviour: dict[int, str] = {}
        self.pool: SlotPool[tuple[int, str]] = SlotPool(
            size,
            self._run,
            on_error=lambda j, exc, _: (j.event.delivery_id, f"error:{type(exc).__name__}"),
            on_progress=self.progress.set,
            **options,  # type: ignore[arg-type]
        )

    def _run(self, j: Job) -> tuple[int, str]:
        n = j.event.delivery_id
        action = self.behaviour.get(n, "ok")
        if action == "block":
            self.release.wait(30)
        elif action == "exit":
            raise SystemExit(3)
        elif action == "raise":
            raise KeyError(n)
        elif action == "io":  # waits on I/O for 2 ms (a commit's flush), using no CPU
            threading.Event().wait(0.002)
        return n, "ok"

    def results(self, count: int, *, within: float = 10.0) -> list[tuple[int, str]]:
        """The next `count` results (fewer if they do not come `within` seconds)."""
        got: list[tuple[int, str]] = []
        deadline = time.monotonic() + within
        while len(got) < count and time.monotonic() < deadline:
            self.progress.wait(0.05)
            self.progress.clear()
            got.extend(self.pool.take())
        return sorted(got)


def poll(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        threading.Event().wait(0.01)
    return True


@pytest.fixture
def harness() -> Iterator[Harness]:
    made: list[Harness] = []

    def make(size: int, **options: object) -> Harness:
        made.append(Harness(size, **options))
        return made[-1]

    yield make  # type: ignore[misc]
    for h in made:
        h.release.set()
        h.pool.close(5)


def test_any_exception_even_system_exit_becomes_a_result_and_the_slot_lives_on(
    harness: type[Harness],
) -> None:
    h = harness(1)
    h.behaviour = {1: "raise", 2: "exit"}
    h.pool.submit(job(n) for n in range(1, 5))
    assert h.results(4) == [(1, "error:KeyError"), (2, "error:SystemExit"), (3, "ok"), (4, "ok")]
    assert h.pool.outstanding == 0


def test_a_job_past_its_timeout_is_given_up_and_its_slot_replaced(
    harness: type[Harness],
) -> None:
    h = harness(1)
    h.behaviour = {1: "block"}
    h.pool.submit([job(1, timeout=0.2), job(2), job(3)])
    expired: list[tuple[Job, float]] = []
    assert poll(lambda: bool(expired.extend(h.pool.expired()) or expired))
    assert [j.event.delivery_id for j, _ in expired] == [1]
    assert expired[0][1] > 0.2
    assert h.results(2) == [(2, "ok"), (3, "ok")]  # the replacement slot ran the rest
    assert h.pool.orphans == 1
    h.release.set()  # the abandoned thread returns: its result is dropped, it exits
    assert poll(lambda: h.pool.orphans == 0)
    assert h.pool.take() == []


def test_stuck_slots_hand_back_the_queue(harness: type[Harness]) -> None:
    h = harness(2)
    h.behaviour = {1: "block", 2: "block"}
    h.pool.submit(job(n) for n in range(1, 6))
    assert poll(lambda: h.pool.running == 2)
    assert not h.pool.stuck(after=60)
    assert h.pool.stuck(after=0.0)
    assert [j.event.delivery_id for j in h.pool.take_queued()] == [3, 4, 5]
    h.release.set()
    assert h.results(2) == [(1, "ok"), (2, "ok")]


def test_a_lane_runs_at_most_its_limit_while_others_flow(harness: type[Harness]) -> None:
    h = harness(4, lane_limit=1)
    h.behaviour = {1: "block"}
    h.pool.submit([job(1, lane="slow"), job(2, lane="slow"), job(3, lane="a"), job(4, lane="b")])
    assert h.results(2) == [(3, "ok"), (4, "ok")]
    assert h.pool.queued == 1  # job 2 waits behind job 1 in its lane
    h.release.set()
    assert h.results(2) == [(1, "ok"), (2, "ok")]


def test_dropped_jobs_never_start(harness: type[Harness]) -> None:
    h = harness(1)
    h.behaviour = {1: "block"}
    h.pool.submit(job(n) for n in range(1, 4))
    assert poll(lambda: h.pool.running == 1)
    assert [j.event.delivery_id for j in h.pool.drop({2, 3})] == [2, 3]
    h.release.set()
    assert h.results(1) == [(1, "ok")]
    assert h.pool.outstanding == 0


def test_jobs_of_an_unconfirmed_lease_wait_for_the_heartbeat(
    harness: type[Harness], settings: Any
) -> None:
    leases = Leases()
    settings.EVENTBUS = {"LEASE_SECONDS": 0.05}
    leases.hold(TOKEN, [1])
    assert poll(lambda: not leases.trusted(job(1)))  # confirmed longer than 80% of a lease ago
    h = harness(1, can_start=leases.trusted)
    h.pool.submit([job(1)])
    assert h.results(1, within=0.5) == []  # held back
    assert h.pool.queued == 1
    settings.EVENTBUS = {"LEASE_SECONDS": 30}
    leases.renew(TOKEN)  # the heartbeat extended the claim
    assert h.results(1) == [(1, "ok")]


def test_one_stale_claim_holds_back_only_its_own_jobs(settings: Any) -> None:
    leases = Leases()
    stale = Job(uuid.uuid4(), job(2).event, 30.0)
    settings.EVENTBUS = {"LEASE_SECONDS": 0.05}
    leases.hold(stale.token, [2])
    assert poll(lambda: not leases.trusted(stale))
    settings.EVENTBUS = {"LEASE_SECONDS": 30}
    leases.hold(TOKEN, [1])  # a fresh claim beside the stale one
    assert leases.trusted(job(1))
    assert not leases.trusted(stale)


def test_a_renewal_after_the_settle_leaves_nothing_behind() -> None:
    leases = Leases()
    leases.hold(TOKEN, [1])
    leases.settled(TOKEN, [1])
    leases.renew(TOKEN)  # the heartbeat read the claim just before it was settled
    assert leases.held() == {} and not leases.trusted(job(1))


def test_leases_forget_what_was_lost_or_settled() -> None:
    leases = Leases()
    leases.hold(TOKEN, [1, 2, 3])
    assert leases.trusted(job(1))
    leases.lose(TOKEN, {2, 3}, never_started={3})
    assert leases.held() == {TOKEN: [1]}
    assert leases.take_lost([1, 2]) == {2}  # 2 ran: its result is dropped, once
    assert leases.take_lost([2]) == set()
    leases.settled(TOKEN, [1])
    assert leases.held() == {} and not leases.trusted(job(1))


@pytest.mark.django_db
def test_every_slotted_pump_counts_the_deliveries_it_lost_once() -> None:
    """The drain and the webhook sender count a heartbeat's lost deliveries alike: those still
    held, once each (ids never held or already lost are not counted again)."""
    pumps: list[SlottedPump[Any]] = [
        DrainPump([], worker_id="w"),
        WebhookPump(WebhookWorkerOptions(), worker_id="w", wake=threading.Event()),
    ]
    for pump in pumps:
        token = uuid.uuid4()
        pump.leases.hold(token, {1, 2, 3})
        before = metrics.LEASES_LOST._value.get()
        pump.lost(token, {2, 3, 9})  # 9 was never this pump's
        pump.lost(token, {2})  # lost already
        assert metrics.LEASES_LOST._value.get() - before == 2, pump.name
        assert pump.held() == {token: [1]}
        pump.close()


def test_committed_deliveries_leave_the_held_set_but_count_until_settled() -> None:
    leases, token = Leases(), uuid.uuid4()
    leases.hold(token, {1, 2, 3})
    leases.commit(token, [2, 3, 9])  # 9 was never held: ignored
    assert leases.held() == {token: [1]}  # the heartbeat extends 1 only
    assert leases.still_held(token, {1, 2}) == {1}  # 2 cannot be lost any more
    assert leases.count() == 3  # --max-events still counts 2 and 3
    leases.settled(token, [1, 2, 3])
    assert (leases.held(), leases.count()) == ({}, 0)


@pytest.mark.parametrize(
    ("grow_to", "sizes"), [(8, [1, 2, 4, 8]), (3, [1, 2, 3, 3]), (None, [1, 1, 1, 1])]
)
def test_a_growing_pool_doubles_per_submit_while_its_jobs_wait_up_to_its_limit(
    harness: type[Harness], grow_to: int | None, sizes: list[int]
) -> None:
    h = harness(1, grow_to=grow_to)
    seen = []
    for round_ in range(4):
        numbers = range(round_ * 20, round_ * 20 + 20)
        h.behaviour.update(dict.fromkeys(numbers, "io"))
        h.pool.submit([job(n) for n in numbers])
        seen.append(h.pool.size)
        assert len(h.results(20)) == 20
        # Gone idle, the slots closed their windows: the jobs' CPU share is measured (~0).
        assert poll(h.pool.idle)
        assert h.pool.cpu_share() < GROW_BELOW_SHARE
    assert seen == sizes  # the first submit has no measure yet: one thread


def test_a_pool_grows_by_live_threads_after_a_job_timed_out(harness: type[Harness]) -> None:
    h = harness(1, grow_to=2)
    h.behaviour[0] = "block"
    h.pool.submit([job(0, timeout=0.05)])
    assert poll(lambda: bool(h.pool.expired()))  # given up on: its thread abandoned, replaced
    h.behaviour.update(dict.fromkeys(range(1, 21), "io"))
    h.pool.submit([job(n) for n in range(1, 21)])  # measured: they wait
    assert len(h.results(20)) == 20
    assert poll(h.pool.idle)
    h.behaviour.update({41: "block", 42: "block"})
    h.pool.submit([job(41), job(42), job(43)])
    assert h.pool.size == 2
    assert poll(lambda: h.pool.running == 2)  # two live threads, not one and the abandoned one


def test_a_pool_grows_only_for_measured_waiting_work_that_queues() -> None:
    assert should_grow(0.05, queued=10, threads=2)
    assert not should_grow(None, queued=10, threads=2)  # not measured yet
    assert not should_grow(0.9, queued=10, threads=2)  # CPU-bound: more threads share the GIL
    assert not should_grow(GROW_BELOW_SHARE, queued=10, threads=2)
    assert not should_grow(0.05, queued=2, threads=2)  # as many jobs as threads: enough


@pytest.mark.django_db
def test_a_run_broken_while_the_settle_forgets_old_runs_stays_broken() -> None:
    """A slot thread marks an ordered run broken (its delivery failed) while the settle forgets
    the runs of claims no longer held: the new mark survives, so the key's later deliveries of
    that run are released, never run after the failed one."""
    pump = DrainPump([], worker_id="w")
    old, new = uuid.uuid4(), uuid.uuid4()
    failed_job = Job(new, job(1).event, 30.0, "conversation-8")
    marker = threading.Thread(target=pump._break_run, args=(failed_job,))

    class Held(dict[uuid.UUID, list[int]]):
        def __contains__(self, token: object) -> bool:
            if not marker.is_alive() and marker.ident is None:
                marker.start()  # the slot thread, while the settle looks at the old runs
                marker.join(0.2)  # it either lands now or waits for the settle to finish
            return token == new

    pump._broken.add((old, "conversation-1"))
    pump.leases.held = Held  # type: ignore[method-assign]
    try:
        pump._settle_results()
        marker.join(10)
        assert pump._broken == {(new, "conversation-8")}
    finally:
        pump.close()
