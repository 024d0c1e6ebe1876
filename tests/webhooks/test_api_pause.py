"""Pausing a webhook subscription through /api/v1/consumers/webhook:<id>: the same pause as any
consumer (deliveries stay pending, uncharged), allowed only to keys of its own organization."""

from __future__ import annotations

from typing import Any

import pytest

import eventbus
from core.models import AuditLog, Organization
from eventbus.store import pauses
from eventbus.store.models import Delivery
from tests.support.api import api_client, error_of
from tests.webhooks.conftest import Subscribe, run_worker
from webhooks import services
from webhooks.models import consumer_name

pytestmark = pytest.mark.django_db


def test_the_owner_pauses_and_resumes_its_subscription(
    org: Organization, subscribe: Subscribe
) -> None:
    subscription, _ = subscribe("http://127.0.0.1:9/hook")
    consumer = consumer_name(subscription.id)
    client = api_client(org, "consumers:read", "consumers:write")
    response = client.post(
        f"/api/v1/consumers/{consumer}/pause", {"reason": "ERP upgrade"}, format="json"
    )
    assert (response.status_code, response.json()["state"]) == (200, "paused")
    assert pauses.is_paused(consumer)
    audit = AuditLog.objects.get(target_id=consumer, action="consumer.pause")
    assert audit.organization_id == org.id
    response = client.post(f"/api/v1/consumers/{consumer}/resume", {}, format="json")
    assert (response.status_code, response.json()["state"]) == (200, "running")


def test_another_organization_cannot_see_or_pause_it(
    org: Organization, org_b: Organization, subscribe: Subscribe
) -> None:
    subscription, _ = subscribe("http://127.0.0.1:9/hook")
    consumer = consumer_name(subscription.id)
    for key_org in (org_b, Organization.objects.system()):
        client = api_client(key_org, "consumers:read", "consumers:write")
        error_of(client.get(f"/api/v1/consumers/{consumer}"), 404, "not_found")
        response = client.post(
            f"/api/v1/consumers/{consumer}/pause", {"reason": "x"}, format="json"
        )
        error_of(response, 404, "not_found")
    assert not pauses.is_paused(consumer)


@pytest.mark.django_db(transaction=True)  # the worker's sending threads see committed rows
def test_a_paused_subscription_is_not_sent_and_not_charged_until_resumed(
    org: Organization, subscribe: Subscribe, receiver: Any
) -> None:
    subscription, _ = subscribe(receiver.url())
    assert services.subscription_pause(subscription=subscription, actor="ops", reason="ERP down")
    eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    run_worker()  # until nothing is due: the paused subscription's delivery is not
    consumer = consumer_name(subscription.id)
    assert list(Delivery.objects.filter(consumer=consumer).values_list("status", "attempts")) == [
        ("pending", 0)
    ]
    assert services.subscription_resume(subscription=subscription, actor="ops")
    run_worker()
    assert Delivery.objects.get(consumer=consumer).status == "done"
    assert len(receiver.requests) == 1
