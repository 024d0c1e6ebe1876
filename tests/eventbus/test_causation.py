"""Causation and correlation, automatic (R-S3): an HTTP request's event, the event its handler
emits, and the webhook delivery of that one, all in one correlation view as a tree, with the
ids on the webhook's headers; a W3C traceparent sets the trace id."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test.utils import override_settings

import eventbus
from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import EventLog
from tests.support.admin import staff
from tests.support.api import api_client
from tests.support.receiver import Receiver
from tests.webhooks.conftest import LOOPBACK_OK, run_worker
from webhooks import services as webhook_services

pytestmark = pytest.mark.django_db(transaction=True)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


def post_start(org: Organization, **headers: str) -> tuple[EventLog, str]:
    client = api_client(org, "events:write")
    body = {"event_type": "test.chain_start", "entity_kind": "lead", "payload": {"n": 1}}
    response = client.post("/api/v1/events", body, format="json", **headers)
    assert response.status_code == 201, response.content
    return EventLog.objects.get(pk=response.json()["id"]), response["X-Request-ID"]


def run_chain() -> None:
    worker = Worker(WorkerOptions(consumers=["chain-worker"], listen=False))
    while worker.run_once():
        pass


def test_request_event_handler_emit_and_webhook_form_one_tree(
    org: Organization, receiver: Receiver, client: Any
) -> None:
    with override_settings(WEBHOOKS=dict(LOOPBACK_OK)):
        subscription, _ = webhook_services.subscription_create(
            organization=org, url=receiver.url(), event_types=["test.chain_next"], actor="test"
        )
    start, request_id = post_start(org, HTTP_TRACEPARENT=TRACEPARENT)
    assert start.metadata["trace_id"] == TRACE_ID and "causation_id" not in start.metadata
    run_chain()
    child = EventLog.objects.get(event_type="test.chain_next")
    assert child.metadata["causation_id"] == str(start.pk)  # automatic inside a handler
    assert (child.metadata["request_id"], child.metadata["trace_id"]) == (request_id, TRACE_ID)
    assert child.metadata["source"] == "consumer:chain-worker"

    with override_settings(WEBHOOKS=dict(LOOPBACK_OK)):
        run_worker()
    [request] = receiver.requests
    assert request.headers["x-causation-id"] == str(start.pk)
    assert request.headers["x-correlation-id"] == TRACE_ID

    client.force_login(staff("ops", "eventbus.view_eventlog", password="pw-Console-1"))
    page = client.get("/admin/ops/correlation/", {"request_id": request_id})
    assert page.status_code == 200
    tree = [(node.event.pk, node.depth) for node in page.context["result"].tree]
    assert tree == [(start.pk, 0), (child.pk, 1)]
    handled = [d.consumer for d in page.context["result"].tree[1].deliveries]
    assert handled == [subscription.consumer]
    html = page.content.decode()
    assert 'id="causation"' in html and f'data-event="{child.pk}" data-depth="1"' in html


def test_an_explicit_causation_wins_and_a_bad_traceparent_is_ignored(org: Organization) -> None:
    start, _ = post_start(org, HTTP_TRACEPARENT="00-" + "0" * 32 + "-00f067aa0ba902b7-01")
    assert "trace_id" not in start.metadata  # an all-zero trace id is invalid: not used
    sentry, _ = post_start(org, HTTP_SENTRY_TRACE=f"{TRACE_ID}-00f067aa0ba902b7-1")
    assert sentry.metadata["trace_id"] == TRACE_ID  # the Sentry trace when there is no W3C one
    cause = uuid.uuid4()
    explicit = eventbus.emit(
        "test.chain_next", organization=org, entity_kind="t", payload={"n": 0}, causation_id=cause
    )
    assert explicit.metadata["causation_id"] == str(cause)
