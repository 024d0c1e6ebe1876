"""Webhook fixtures: loopback targets allowed, subscriptions, and an in-process worker."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test.utils import override_settings

from core.models import Organization
from eventbus.dispatch import claim as claims
from webhooks import services
from webhooks.conf import CONSUMER_PREFIX
from webhooks.models import Subscription
from webhooks.worker import WebhookWorker, WebhookWorkerOptions

LOOPBACK_OK: dict[str, Any] = {
    "ALLOW_PRIVATE_TARGETS": True,  # the receiver is on 127.0.0.1
    "ALLOW_HTTP": True,
    "TIMEOUT": 2.0,
    "CONNECT_TIMEOUT": 1.0,
}


@pytest.fixture
def loopback_ok() -> Iterator[dict[str, Any]]:
    with override_settings(WEBHOOKS=dict(LOOPBACK_OK)):
        yield LOOPBACK_OK


Subscribe = Callable[..., tuple[Subscription, str]]


@pytest.fixture
def subscribe(org: Organization, loopback_ok: dict[str, Any]) -> Subscribe:
    def make(
        url: str, event_types: list[str] | None = None, organization: Organization | None = None
    ) -> tuple[Subscription, str]:
        return services.subscription_create(
            organization=organization or org,
            url=url,
            event_types=event_types or ["*"],
            actor="test",
        )

    return make


def run_worker(**options: Any) -> WebhookWorker:
    """Run the webhook worker in-process until nothing is due (`--once`)."""
    options.setdefault("once", True)
    options.setdefault("listen", False)
    options.setdefault("startup_jitter", 0)
    options.setdefault("concurrency", 8)
    worker = WebhookWorker(WebhookWorkerOptions(**options))
    worker.run()
    return worker


def pump(worker: WebhookWorker) -> int:
    """One claim/settle pass plus waiting for what it started; returns deliveries settled."""
    before = worker.processed
    worker.run_once()
    while worker.in_flight:
        worker.wake.wait(5)
        worker.wake.clear()
        worker.run_once()
    return worker.processed - before


def settle_as_sent() -> list[int]:
    """Claim every due webhook delivery and ack it, sending nothing (the bus's own transitions).

    For tests that need done deliveries but must not make HTTP requests.
    """
    claim = claims.claim_prefixed(prefix=CONSUMER_PREFIX, batch_size=1000, worker_id="t", cap=1000)
    claims.ack(claim.token, claim.ids)
    return claim.ids
