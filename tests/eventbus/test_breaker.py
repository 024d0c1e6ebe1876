"""The circuit breaker: a consumer failing past the threshold is paused as "open" with an alert;
after the cool-down one probe runs ("half-open"); a failed probe re-opens it, a good one closes
it and the backlog drains. Time is controlled (time-machine), not slept."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import time_machine
from django.conf import settings
from django.test import override_settings

import eventbus
from core.models import AuditLog, Organization
from eventbus.dispatch import breaker
from eventbus.dispatch.drain import run_adopted
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store import pauses
from eventbus.store.models import ConsumerState, Delivery
from eventbus.store.registry import registry
from tests.support.consumers import set_failing

CONSUMER = "recovering-worker"
ALERTS: list[tuple[str, Mapping[str, object]]] = []


def record_alert(subject: str, details: Mapping[str, object]) -> None:
    ALERTS.append((subject, details))


@pytest.fixture
def small_breaker(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(breaker, "_tally", breaker.Tally())
    ALERTS.clear()
    policy = {
        "BREAKER_ENABLED": True,
        "BREAKER_FAILURE_RATE": 0.5,
        "BREAKER_MIN_VOLUME": 4,
        "BREAKER_WINDOW_SECONDS": 60.0,
        "BREAKER_COOL_DOWN_SECONDS": 30.0,
    }
    bus = {**settings.EVENTBUS, **policy, "BREAKER_CONSUMERS": {}}
    with override_settings(EVENTBUS=bus, ALERT_HOOKS=[f"{__name__}.record_alert"]):
        yield


def emit(org: Organization, n: int) -> None:
    eventbus.emit_many(
        [
            {"event_type": "test.recovering", "entity_kind": "t", "payload": {"n": i}}
            for i in range(n)
        ],
        organization=org,
    )


def drain(worker: Worker) -> None:
    while worker.run_once():
        pass
    breaker.flush(force=True)


def state() -> ConsumerState:
    return ConsumerState.objects.get(pk=CONSUMER)


def probe() -> list[str]:
    """What a pump does about once a second: take the due probe, run it, settle, flush."""
    batches = breaker.claim_probes(pauses.paused_among([CONSUMER]), worker_id="w")
    outcomes = [
        run_adopted(registry.get(CONSUMER), b.token, e, worker_id="w")
        for b in batches
        for e in b.events
    ]
    breaker.flush(force=True)
    return outcomes


@pytest.mark.parametrize(
    ("ok", "failed", "trips"),
    [(0, 3, False), (2, 2, True), (3, 1, False), (10, 10, True), (11, 9, False)],
)
def test_the_threshold_needs_both_the_rate_and_the_volume(
    ok: int, failed: int, trips: bool
) -> None:
    policy = breaker.Policy(True, 0.5, 4, 60.0, 30.0)
    assert policy.trips(ok, failed) is trips


def test_a_consumer_override_wins(small_breaker: None) -> None:
    bus = {**settings.EVENTBUS, "BREAKER_CONSUMERS": {CONSUMER: {"MIN_VOLUME": 50}}}
    with override_settings(EVENTBUS=bus):
        assert breaker.policy_for(CONSUMER).min_volume == 50
        assert breaker.policy_for("effect-a-worker").min_volume == 4


@pytest.mark.django_db
def test_opens_probes_reopens_then_closes_and_drains(
    org: Organization, side_effects: None, small_breaker: None
) -> None:
    set_failing(CONSUMER, True)
    emit(org, 6)
    worker = Worker(WorkerOptions(consumers=[CONSUMER], listen=False))
    drain(worker)

    assert state().state == "open"
    # The cool-down counts from the opening, not from before the drain (which took seconds
    # on a loaded machine, and the probe was then not due yet at start + 31 s).
    start = state().since
    assert "6 of 6 deliveries failed" in state().reason
    assert [subject for subject, _ in ALERTS] == ["consumer circuit breaker open"]
    emit(org, 2)
    assert worker.run_once() == 0  # open: nothing claimed, nothing charged
    assert probe() == []  # still cooling down

    with time_machine.travel(start + dt.timedelta(seconds=31), tick=False):
        assert probe() == ["failed"]
        assert (state().state, state().reason) == ("open", "the probe delivery failed: open again")

    set_failing(CONSUMER, False)
    with time_machine.travel(start + dt.timedelta(seconds=62), tick=False):
        assert probe() == ["done"]
        assert state().state == "running"
    with time_machine.travel(start + dt.timedelta(hours=2), tick=False):
        drain(worker)
    assert set(Delivery.objects.filter(consumer=CONSUMER).values_list("status", flat=True)) == {
        "done"
    }
    assert list(
        AuditLog.objects.filter(target_id=CONSUMER).order_by("id").values_list("action", flat=True)
    ) == ["consumer.breaker_open", "consumer.breaker_open", "consumer.breaker_close"]


@pytest.mark.django_db
def test_one_failure_in_a_quiet_consumer_does_not_open_it(
    org: Organization, side_effects: None, small_breaker: None
) -> None:
    set_failing(CONSUMER, True)
    emit(org, 3)  # below MIN_VOLUME, every one failing
    drain(Worker(WorkerOptions(consumers=[CONSUMER], listen=False)))
    assert state().state == "running"
    assert (state().window_ok, state().window_failed) == (0, 3)
    assert ALERTS == []


def test_switched_off_nothing_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(breaker, "_tally", breaker.Tally())
    breaker.count({1: CONSUMER}, ok=[], failed=[1])
    assert breaker._tally.take(force=True) == {}


def test_webhook_subscriptions_are_left_to_their_own_breaker(small_breaker: None) -> None:
    breaker.count({1: "webhook:1234", 2: CONSUMER}, ok=[1], failed=[2])
    counts: dict[str, Any] = breaker._tally.take(force=True)
    assert counts == {CONSUMER: [0, 1]}
