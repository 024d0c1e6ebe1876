"""Consumers of the core records' events (discovered at start-up)."""

from __future__ import annotations

from django.utils import timezone

import eventbus
from crm.models import Order


@eventbus.consumer(
    "order-post-worker",
    events=["order.confirmed"],
    runs_on="broker",  # seed 004: published by the outbox relay, run by the jobs process
    atomic=True,  # the mark below commits together with the ack
)
def order_post(event: eventbus.Event) -> None:
    """The `order.post` phase: post-process a confirmed order once (never undo it).

    The seed runs a configurable pipeline here (ERP, notifications); this minimal version marks
    the order post-processed, idempotently, so a retried delivery changes nothing twice.
    Attempts: ORDER_POST_ATTEMPTS (default 5); concurrency per jobs process: ORDER_POST_CONCURRENCY.
    """
    Order.objects.filter(
        pk=event.payload["order_id"],
        organization_id=event.organization_id,
        post_processed_at__isnull=True,
    ).update(post_processed_at=timezone.now())
