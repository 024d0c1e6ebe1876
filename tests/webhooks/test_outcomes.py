"""Retries, the DLQ, Retry-After, 410 and auto-disable, on a real receiver with time controlled."""

from __future__ import annotations

import datetime as dt
import itertools
import subprocess
import sys
import uuid
from typing import Any

import pytest
import time_machine
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery, EventLog
from tests.support.processes import REPO, subprocess_env
from tests.support.receiver import Receiver, Reply
from tests.webhooks.conftest import Subscribe, run_worker
from webhooks import outcome, services, signing
from webhooks.models import Attempt, Subscription
from webhooks.sender import AttemptResult
from webhooks.worker import WebhookWorker, WebhookWorkerOptions

pytestmark = pytest.mark.django_db(transaction=True)
START = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)


def emit_leads(org: Organization, n: int = 1) -> list[EventLog]:
    return [
        eventbus.emit(
            "lead.assigned",
            organization=org,
            entity_kind="lead",
            entity_id=uuid.uuid4(),
            payload={"to_owner_id": f"u{i}"},
        )
        for i in range(n)
    ]


def due_in(delivery: Delivery) -> float:
    delivery.refresh_from_db()
    return (delivery.next_attempt_at - timezone.now()).total_seconds()


def test_failures_retry_with_the_shared_backoff_then_go_to_the_dlq(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/fail"] = Reply(status=500, body=b"boom")
    with time_machine.travel(START, tick=False) as clock:
        # lead.* only: a `*` subscriber would also get (and fail) the webhook.delivery_failed
        subscription, _ = subscribe(receiver.url("/fail"), ["lead.*"])
        emit_leads(org)
        delivery = Delivery.objects.get(consumer=subscription.consumer)
        for attempt, step in enumerate([30, 60, 120, 300, 600, 1800, 3600], start=1):
            run_worker()
            wait = due_in(delivery)
            assert (delivery.status, delivery.attempts) == ("pending", attempt)
            assert step <= wait <= step * 1.3
            clock.shift(dt.timedelta(seconds=wait + 1))
        run_worker()
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("dead", 8)
    assert delivery.last_error == "HTTP 500 Internal Server Error"
    assert len(receiver.requests) == 8
    assert [r.headers["x-webhook-attempt"] for r in receiver.requests] == [
        str(n) for n in range(1, 9)
    ]
    assert len({r.headers["x-webhook-delivery"] for r in receiver.requests}) == 1
    assert Attempt.objects.filter(delivery=delivery).count() == 8
    assert EventLog.objects.get(event_type="lead.assigned").status == "dead"
    assert EventLog.objects.get(event_type="webhook.delivery_failed").payload["attempt"] == 8
    subscription.refresh_from_db()
    assert (subscription.enabled, subscription.consecutive_failures) == (True, 8)


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [("120", 120.0), ("999999", 3600.0), ("0", 1.0)],
)
def test_429_honours_retry_after_within_bounds(
    org: Organization,
    receiver: Receiver,
    subscribe: Subscribe,
    retry_after: str,
    expected: float,
) -> None:
    receiver.replies["/busy"] = Reply(status=429, headers={"Retry-After": retry_after})
    with time_machine.travel(START, tick=False):
        subscription, _ = subscribe(receiver.url("/busy"))
        emit_leads(org)
        run_worker()
        delivery = Delivery.objects.get(consumer=subscription.consumer)
        assert due_in(delivery) == pytest.approx(expected)


def test_503_honours_an_http_date_retry_after(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    later = "Mon, 02 Nov 2026 12:10:00 GMT"  # START + 10 min
    receiver.replies["/down"] = Reply(status=503, headers={"Retry-After": later})
    with time_machine.travel(START, tick=False):
        subscription, _ = subscribe(receiver.url("/down"))
        emit_leads(org)
        run_worker()
        assert due_in(Delivery.objects.get(consumer=subscription.consumer)) == 600


def test_410_gone_disables_the_subscription_at_once(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/gone"] = Reply(status=410)
    subscription, _ = subscribe(receiver.url("/gone"), ["lead.*"])
    _watcher, _ = subscribe(receiver.url("/watch"), ["webhook.*"])
    emit_leads(org)
    run_worker()
    run_worker()  # delivers the webhook.subscription_disabled event
    subscription.refresh_from_db()
    assert not subscription.enabled and "410" in subscription.disabled_reason
    assert Delivery.objects.get(consumer=subscription.consumer).status == "dead"
    # The dead delivery's webhook.delivery_failed, then the subscription_disabled notice.
    notices = sorted(r.headers["x-webhook-event"] for r in receiver.on("/watch"))
    assert notices == ["webhook.delivery_failed", "webhook.subscription_disabled"]


def test_ten_consecutive_failures_disable_and_emit_never_to_the_disabled_endpoint(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/fail"] = Reply(status=500)
    failing, _ = subscribe(receiver.url("/fail"), ["*"])
    _watcher, _ = subscribe(receiver.url("/watch"), ["webhook.subscription_disabled"])
    emit_leads(org, 9)
    run_worker()
    failing.refresh_from_db()
    assert (failing.enabled, failing.consecutive_failures) == (True, 9)
    emit_leads(org, 1)
    run_worker()
    failing.refresh_from_db()
    assert not failing.enabled and failing.disabled_reason == "10 consecutive failed deliveries"
    event = EventLog.objects.get(event_type="webhook.subscription_disabled")
    assert event.payload["subscription_id"] == str(failing.id)
    assert event.payload["last_error"] == "HTTP 500 Internal Server Error"
    assert not Delivery.objects.filter(event=event, consumer=failing.consumer).exists()
    run_worker()
    assert len(receiver.on("/watch")) == 1
    assert len(receiver.on("/fail")) == 10

    # Its retries come due later: they die unsent; the endpoint never hears from us again.
    with time_machine.travel(timezone.now() + dt.timedelta(hours=1), tick=True):
        run_worker()
    assert len(receiver.on("/fail")) == 10
    dead = Delivery.objects.filter(consumer=failing.consumer, error_class="SubscriptionDisabled")
    assert dead.count() == 10


def test_a_burst_to_a_failing_endpoint_sends_at_most_ten_requests(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/fail"] = Reply(status=500)
    failing, _ = subscribe(receiver.url("/fail"), ["lead.*"])
    emit_leads(org, 14)  # all due at once: one claim takes them all
    run_worker(concurrency=32, per_subscription=16)
    failing.refresh_from_db()
    assert not failing.enabled and failing.disabled_reason.endswith("consecutive failed deliveries")
    assert len(receiver.on("/fail")) == 10
    held_back = Attempt.objects.filter(subscription_id=failing.id, error_class="CircuitOpen")
    assert held_back.count() == 4 and {a.status_code for a in held_back} == {None}
    with time_machine.travel(timezone.now() + dt.timedelta(hours=1), tick=True):
        run_worker()
    assert len(receiver.on("/fail")) == 10
    assert Delivery.objects.filter(consumer=failing.consumer, status="dead").count() == 14


def test_a_failing_endpoint_is_probed_one_request_at_a_time(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/flaky"] = Reply(status=503, delay=0.05)
    subscription, _ = subscribe(receiver.url("/flaky"), ["lead.*"])
    Subscription.objects.filter(pk=subscription.pk).update(consecutive_failures=2)
    emit_leads(org, 5)
    run_worker(concurrency=8)
    times = sorted(r.at for r in receiver.on("/flaky"))
    assert len(times) == 5
    # Each request started after the previous answer (held 0.05 s): never two at once.
    assert all(b - a >= 0.04 for a, b in itertools.pairwise(times)), times
    subscription.refresh_from_db()
    assert (subscription.enabled, subscription.consecutive_failures) == (True, 7)


def test_a_success_resets_the_consecutive_failure_counter(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/flaky"] = Reply(status=502)
    subscription, _ = subscribe(receiver.url("/flaky"))
    emit_leads(org, 9)
    run_worker()
    subscription.refresh_from_db()
    assert subscription.consecutive_failures == 9
    receiver.replies["/flaky"] = Reply(status=204, body=b"")
    emit_leads(org, 1)
    run_worker()
    subscription.refresh_from_db()
    assert (subscription.enabled, subscription.consecutive_failures) == (True, 0)


def test_re_enabling_is_explicit_and_resets_the_counter(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscription, _ = subscribe(receiver.url())
    assert services.subscription_disable(
        subscription_id=subscription.id, actor="ops", reason="maintenance"
    )
    assert not services.subscription_disable(
        subscription_id=subscription.id, actor="ops", reason="twice"
    )
    emit_leads(org)
    run_worker()
    assert receiver.requests == []  # disabled: no delivery was even created
    services.subscription_enable(subscription=Subscription.objects.get(), actor="ops")
    emit_leads(org)
    run_worker()
    assert len(receiver.requests) == 1
    assert EventLog.objects.filter(event_type="webhook.subscription_disabled").count() == 1


def test_a_subscription_deleted_mid_flight_settles_cleanly(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/hook"] = Reply(delay=0.5)  # still in flight when the delete commits
    subscription, _ = subscribe(receiver.url())
    emit_leads(org, 2)
    worker = WebhookWorker(WebhookWorkerOptions(listen=False, startup_jitter=0))
    try:
        worker.run_once()  # claimed and sending
        services.subscription_delete(subscription=subscription, actor="t")
        while worker.in_flight:
            worker.wake.wait(5)
            worker.wake.clear()
            worker.run_once()
    finally:
        worker.close()
    webhook_deliveries = Delivery.objects.filter(consumer__startswith="webhook:")
    assert set(webhook_deliveries.values_list("status", flat=True)) == {"done"}
    assert len(receiver.requests) == 2
    assert Attempt.objects.count() == 2  # logged although the subscription is gone


POLICY = outcome.Policy(schedule=[30, 60], jitter=0.0, max_retry_after=3600.0)


def failed_with(error_class: str) -> AttemptResult:
    return AttemptResult(
        uuid.uuid4(), "https://hooks.example.com/", START, 5, None, "", error_class, "..."
    )


@pytest.mark.parametrize("error_class", ["InvalidURL", "UnsupportedProtocol", "BlockedDestination"])
def test_an_unsendable_url_or_refused_address_is_dead_at_the_first_attempt(
    error_class: str,
) -> None:
    decision = outcome.judge(failed_with(error_class), attempt=1, max_attempts=8, policy=POLICY)
    assert decision.verdict is not None and decision.verdict.dead
    assert decision.verdict.error_class == error_class and not decision.disable_reason


@pytest.mark.parametrize("error_class", ["ConnectError", "Timeout", "RuntimeError", "KeyError"])
def test_network_errors_and_unexpected_exceptions_are_retried_until_the_last_attempt(
    error_class: str,
) -> None:
    first = outcome.judge(failed_with(error_class), attempt=1, max_attempts=3, policy=POLICY)
    last = outcome.judge(failed_with(error_class), attempt=3, max_attempts=3, policy=POLICY)
    assert first.verdict == outcome.Verdict(False, 30.0, error_class, "...")
    assert last.verdict is not None and last.verdict.dead


def test_an_attempt_with_no_response_is_retried_per_the_table_until_the_last_attempt() -> None:
    first = outcome.failed_attempt(
        "HandlerTimeout", "x" * 5000, attempt=1, max_attempts=2, policy=POLICY
    )
    last = outcome.failed_attempt(
        "HandlerTimeout", "late", attempt=2, max_attempts=2, policy=POLICY
    )
    assert first == outcome.Decision(outcome.Verdict(False, 30.0, "HandlerTimeout", "x" * 4000))
    assert last == outcome.Decision(outcome.Verdict(True, 0.0, "HandlerTimeout", "late"))


def test_a_bug_in_the_sender_is_a_recorded_failure_then_retried(
    org: Organization, receiver: Receiver, subscribe: Subscribe, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("the signer broke")

    with time_machine.travel(START, tick=False) as clock:
        subscription, _ = subscribe(receiver.url())
        emit_leads(org)
        delivery = Delivery.objects.get(consumer=subscription.consumer)
        with monkeypatch.context() as patched:
            patched.setattr(signing, "signature", broken)
            run_worker()
        wait = due_in(delivery)
        assert (delivery.status, delivery.attempts) == ("pending", 1)
        assert delivery.last_error == "RuntimeError: the signer broke" and 30 <= wait <= 39
        [failure] = Attempt.objects.all()
        assert (failure.error_class, failure.status_code) == ("RuntimeError", None)
        assert receiver.requests == []
        clock.shift(dt.timedelta(seconds=wait + 1))
        run_worker()  # the "deploy" fixed the signer
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts) == ("done", 2)
    assert [r.headers["x-webhook-attempt"] for r in receiver.requests] == ["2"]


@pytest.mark.slow
def test_a_stored_url_the_transport_cannot_send_is_dead_at_once_and_the_worker_returns(
    org: Organization, receiver: Receiver
) -> None:
    """A row from before the URL checks: `deliver_webhooks --once` still finishes."""
    subscription = Subscription.objects.create(
        organization=org,
        url=f"http://0177.0.0.1:{receiver.port}/hook",
        event_types=["*"],
        secret_encrypted=signing.encrypt_secret(signing.generate_secret()),
    )
    emit_leads(org, 3)
    finished = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "deliver_webhooks", "--once"],
        env=subprocess_env(WEBHOOKS_ALLOW_PRIVATE_TARGETS="true", WEBHOOKS_ALLOW_HTTP="true"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert finished.returncode == 0, finished.stdout + finished.stderr
    # Each dead delivery's webhook.delivery_failed goes to the same `*` subscription (whose
    # failure reports nothing more).
    deliveries = Delivery.objects.filter(consumer=subscription.consumer, event_type="lead.assigned")
    assert [(d.status, d.attempts) for d in deliveries] == [("dead", 1)] * 3
    failed = Delivery.objects.filter(consumer=subscription.consumer).exclude(pk__in=deliveries)
    assert {d.event_type for d in failed} <= {"webhook.delivery_failed"}
    assert "'0177.0.0.1' is not a canonical IPv4 address" in deliveries[0].last_error
    assert deliveries[0].last_error.startswith("InvalidURL: url host")
    assert set(Attempt.objects.values_list("error_class", flat=True)) == {"InvalidURL"}
    assert not Delivery.objects.filter(status="processing").exists()
    assert receiver.connections == 0
