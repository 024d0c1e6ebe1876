"""Sentry: a captured event (request error, worker error) carries no personal data; health
transactions are dropped. Events go to a local in-memory transport, never to the network."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import sentry_sdk
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.test.utils import override_settings
from django.urls import include, path
from sentry_sdk.envelope import Envelope
from sentry_sdk.transport import Transport

import eventbus
from core.models import Organization
from core.sentry import before_send_transaction, init_sentry
from eventbus.dispatch.worker import Worker, WorkerOptions
from tests.support.pii import KEYED_SECRETS, PII_SAMPLES, leaked

HOSTILE = " ".join(PII_SAMPLES)


class LocalTransport(Transport):
    """Keeps every envelope in memory."""

    envelopes: list[Envelope] = []

    def capture_envelope(self, envelope: Envelope) -> None:
        LocalTransport.envelopes.append(envelope)


def items(kind: str) -> list[dict[str, Any]]:
    return [
        json.loads(item.get_bytes())
        for envelope in LocalTransport.envelopes
        for item in envelope.items
        if item.headers.get("type") == kind
    ]


def everything_sent() -> str:
    return "".join(e.serialize().decode() for e in LocalTransport.envelopes)


def boom(request: HttpRequest) -> HttpResponse:
    raise ValueError(f"could not process contact {HOSTILE}")


urlpatterns = [path("boom", boom), path("", include("deskcomm.urls"))]


@pytest.fixture
def sentry() -> Iterator[None]:
    LocalTransport.envelopes = []
    with override_settings(
        SENTRY_DSN="https://public@sentry.invalid/1", SENTRY_TRACES_SAMPLE_RATE=1.0
    ):
        assert init_sentry(transport=LocalTransport)
    try:
        yield
    finally:
        sentry_sdk.flush()
        sentry_sdk.init()  # no DSN: off again for the other tests


@pytest.mark.django_db
@override_settings(ROOT_URLCONF=__name__, DEBUG_PROPAGATE_EXCEPTIONS=False)
def test_a_request_error_sends_no_personal_data(
    sentry: None, caplog: pytest.LogCaptureFixture
) -> None:
    client = Client(raise_request_exception=False)
    with caplog.at_level(logging.CRITICAL, logger="django.request"):
        response = client.post(
            f"/boom?email={PII_SAMPLES[5]}&cpf={PII_SAMPLES[0]}",
            data=json.dumps({"note": HOSTILE, **KEYED_SECRETS}),
            content_type="application/json",
            HTTP_AUTHORIZATION=PII_SAMPLES[6],
            HTTP_X_API_KEY=KEYED_SECRETS["X-Api-Key"],
            HTTP_COOKIE=f"sessionid={KEYED_SECRETS['password']}",
        )
    sentry_sdk.flush()
    assert response.status_code == 500
    (event,) = items("event")
    assert event["exception"]["values"][0]["type"] == "ValueError"
    assert "[CPF]" in event["exception"]["values"][0]["value"]
    assert "data" not in event["request"] and "cookies" not in event["request"]
    assert event["tags"]["route"] == "/boom"
    assert leaked(everything_sent()) == []


@pytest.mark.django_db(transaction=True)
def test_a_worker_error_is_tagged_and_redacted(org: Organization, sentry: None) -> None:
    with override_settings(EVENTBUS={**settings.EVENTBUS, "MAX_ATTEMPTS": 1}):
        event = eventbus.emit(
            "test.flaky", organization=org, entity_kind="t", payload={"n": HOSTILE}
        )
    Worker(WorkerOptions(consumers=["flaky-worker"], listen=False)).run_once()
    sentry_sdk.flush()
    captured = items("event")
    assert len(captured) == 2  # the handler's failure and the dead-letter alert
    for tags in (c["tags"] for c in captured):
        assert tags["consumer"] == "flaky-worker" and tags["event_id"] == str(event.id)
        assert tags["organization_id"] == str(org.id)
    assert leaked(everything_sent()) == []


def test_health_transactions_are_dropped(sentry: None) -> None:
    # Django's test client bypasses the WSGI handler Sentry wraps to start transactions, so the
    # hook is checked directly, and proven to be the one the SDK calls.
    assert sentry_sdk.get_client().options["before_send_transaction"] is before_send_transaction
    health = {"type": "transaction", "transaction": "/api/v1/health", "request": {}}
    ping = {"type": "transaction", "transaction": "/api/ping", "spans": [{"description": HOSTILE}]}
    assert before_send_transaction(health, {}) is None  # type: ignore[arg-type]
    kept = before_send_transaction(ping, {})  # type: ignore[arg-type]
    assert kept is not None and leaked(json.dumps(kept)) == []
