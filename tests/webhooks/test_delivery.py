"""End to end on a real loopback receiver: signatures, headers, body, rotation, resend."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.utils import timezone
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery, EventLog
from tests.support.api import client_for, issue_key, prefix_of
from tests.support.receiver import Receiver, Reply
from tests.webhooks.conftest import Subscribe, run_worker
from webhooks import services
from webhooks.models import Attempt, Subscription
from webhooks.signing import delivery_id

pytestmark = pytest.mark.django_db(transaction=True)


def emit_lead(org: Organization, **payload: object) -> EventLog:
    return eventbus.emit(
        "lead.stage_changed",
        organization=org,
        entity_kind="lead",
        entity_id=uuid.uuid4(),
        payload={"from_stage_id": "new", "to_stage_id": "won", **payload},
    )


def test_delivery_verifies_with_standardwebhooks_and_carries_our_headers(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscription, secret = subscribe(receiver.url())
    event = emit_lead(org)
    run_worker()
    [request] = receiver.requests
    body = Webhook(secret).verify(request.body, request.headers)  # raises if the signature is off
    assert body["event_id"] == str(event.id)
    assert body["type"] == "lead.stage_changed"
    assert body["organization_id"] == str(org.id)
    assert body["entity_kind"] == "lead" and body["entity_id"] == str(event.entity_id)
    assert body["payload"] == {"from_stage_id": "new", "to_stage_id": "won"}
    assert body["schema_version"] == 1 and "occurred_at" in body
    wid = str(delivery_id(event.id, subscription.id))
    h = request.headers
    assert h["x-webhook-delivery"] == h["webhook-id"] == wid
    assert h["x-webhook-attempt"] == "1"
    assert h["x-webhook-timestamp"] == h["webhook-timestamp"]
    assert h["x-webhook-signature"] == h["webhook-signature"]
    assert h["content-type"] == "application/json"
    assert h["user-agent"].startswith("Deskcomm-Webhooks")
    assert Delivery.objects.get(consumer=subscription.consumer).status == "done"
    assert EventLog.objects.get(pk=event.pk).status == "done"
    attempt = Attempt.objects.get()
    assert (attempt.status_code, attempt.response_excerpt, attempt.error_class) == (200, "ok", "")


def test_the_signed_body_says_who_produced_the_event(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    """An integrator's event (the API door) and the platform's own are told apart in the signed
    body, the platform's internal component names left out."""
    _, secret = subscribe(receiver.url())
    token = issue_key(org, "events:write")
    body = {
        "event_type": "lead.won",
        "entity_kind": "lead",
        "payload": {"value": 99999, "won_at": "2026-12-04"},
    }
    assert client_for(token).post("/api/v1/events", body, format="json").status_code == 201
    emit_lead(org)
    run_worker()
    bodies = {
        b["type"]: b for b in (Webhook(secret).verify(r.body, r.headers) for r in receiver.requests)
    }
    assert bodies["lead.won"]["provenance"] == {
        "door": "api",
        "producer": f"api_key:{prefix_of(token)}",
    }
    assert bodies["lead.stage_changed"]["provenance"] == {"door": "app", "producer": "app:tests"}


def test_a_wrong_secret_does_not_verify(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscribe(receiver.url())
    emit_lead(org)
    run_worker()
    other_secret = services.signing.generate_secret()
    with pytest.raises(WebhookVerificationError):
        Webhook(other_secret).verify(receiver.requests[0].body, receiver.requests[0].headers)


def test_rotation_signs_with_both_secrets_during_the_window_then_only_the_new(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscription, old_secret = subscribe(receiver.url())
    new_secret = services.subscription_rotate_secret(subscription=subscription, actor="test")
    emit_lead(org)
    run_worker()
    during = receiver.requests[-1]
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    for secret in (old_secret, new_secret):
        Webhook(secret).verify(during.body, during.headers)

    with time_machine.travel(timezone.now() + dt.timedelta(hours=24, seconds=1), tick=True):
        emit_lead(org)
        run_worker()
        after = receiver.requests[-1]
        assert len(after.headers["webhook-signature"].split(" ")) == 1
        Webhook(new_secret).verify(after.body, after.headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(old_secret).verify(after.body, after.headers)


def test_resend_sends_again_with_the_same_delivery_id(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscription, secret = subscribe(receiver.url())
    emit_lead(org)
    run_worker()
    delivery = Delivery.objects.get(consumer=subscription.consumer)
    services.delivery_resend(delivery=delivery, actor="test")
    run_worker()
    first, second = receiver.requests
    assert first.headers["x-webhook-delivery"] == second.headers["x-webhook-delivery"]
    assert first.body == second.body  # same event, same bytes; a fresh timestamp and signature
    Webhook(secret).verify(second.body, second.headers)
    assert Attempt.objects.filter(delivery=delivery).count() == 2
    delivery.refresh_from_db()
    assert delivery.status == "done"


def test_resend_is_refused_while_pending_and_for_a_disabled_subscription(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscription, _ = subscribe(receiver.url())
    emit_lead(org)
    delivery = Delivery.objects.get(consumer=subscription.consumer)
    with pytest.raises(services.ResendRefused, match="only done or dead"):
        services.delivery_resend(delivery=delivery, actor="test")
    run_worker()
    services.subscription_disable(subscription_id=subscription.id, actor="test", reason="manual")
    with pytest.raises(services.ResendRefused, match="disabled"):
        services.delivery_resend(delivery=delivery, actor="test")
    assert len(receiver.requests) == 1


def test_the_response_excerpt_is_capped_at_2_kib(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/big"] = Reply(status=500, body=b"x" * 10_000)
    subscribe(receiver.url("/big"))
    emit_lead(org)
    run_worker()
    attempt = Attempt.objects.get()
    assert attempt.status_code == 500 and len(attempt.response_excerpt) == 2048
    assert attempt.error_class == "HTTPStatus" and attempt.duration_ms >= 0


def test_redirects_are_not_followed(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    receiver.replies["/moved"] = Reply(status=302, headers={"Location": receiver.url("/other")})
    subscription, _ = subscribe(receiver.url("/moved"))
    emit_lead(org)
    run_worker()
    assert [r.path for r in receiver.requests] == ["/moved"]
    delivery = Delivery.objects.get(consumer=subscription.consumer)
    assert delivery.status == "pending" and "not followed" in (delivery.last_error or "")


def test_a_subscription_only_gets_matching_events(
    org: Organization, org_b: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    subscribe(receiver.url("/leads"), ["lead.*"])
    subscribe(receiver.url("/won"), ["lead.won"])
    subscribe(receiver.url("/other-tenant"), ["*"], organization=org_b)
    emit_lead(org)
    run_worker()
    assert [r.path for r in receiver.requests] == ["/leads"]
    assert Subscription.objects.count() == 3
