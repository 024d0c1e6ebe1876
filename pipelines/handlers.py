"""The broker-run consumers that run pipelines (discovered at start-up).

- `order-post-worker` (seed 004 §3): `order.confirmed` runs the organization's enabled
  `order.post` pipeline; with none, it only stamps the order post-processed. A FAILED pipeline
  raises, so the bus retries with backoff up to ORDER_POST_ATTEMPTS and then dead-letters the
  delivery (DLQ, `/api/outbox` FAILED, reprocessable). Post-processing never undoes the order.
- `pipeline-event-worker`: `event.<Type>` pipelines for the event types listed in
  PIPELINES_EVENT_TYPES. It subscribes to exactly those types at start-up: an event type nobody
  built a pipeline for never gets a delivery for it, so the drain pays nothing for the
  convention. (A wildcard subscription would add a delivery to every event of every type.)

Neither is `atomic`: the execution and its steps must outlive a failed attempt (they are the
tracking the retries resume from), so each step commits on its own and the engine is idempotent
per (pipeline, event) instead.
"""

from __future__ import annotations

import logging

from django.utils import timezone

import eventbus
from crm.models import Order
from eventbus.store.provenance import cause_of
from eventbus.store.registry import Consumer, make_consumer, registry
from eventbus.store.tenancy import guard_ids, guard_payload
from pipelines import engine, metrics, selectors
from pipelines.conf import pipeline_settings
from pipelines.context import event_context, order_context
from pipelines.definition import EVENT_PREFIX, EVENT_WORKER, TRIGGER_ORDER_POST

logger = logging.getLogger(__name__)


class PipelineFailed(Exception):
    """A pipeline run ended FAILED: transient for the bus (retried, then dead-lettered)."""


@eventbus.consumer(
    "order-post-worker",
    events=["order.confirmed"],
    runs_on="broker",  # seed 004: published by the outbox relay, run by the jobs process
)
def order_post(event: eventbus.Event) -> None:
    """The `order.post` phase: run the order.post pipeline once per event, then mark the order
    post-processed (idempotently: a retried delivery changes nothing twice).

    Attempts: ORDER_POST_ATTEMPTS (default 5); concurrency per jobs process: ORDER_POST_CONCURRENCY.
    """
    guard_payload(event, {"order_id": Order})  # another tenant's order is never touched
    pipeline = selectors.enabled_pipeline(event.organization_id, TRIGGER_ORDER_POST)
    if pipeline is not None:
        outcome = engine.run(
            pipeline,
            context=order_context(event.payload),
            event_id=event.id,
            order_id=event.payload.get("order_id"),
        )
        if outcome.failed:
            raise PipelineFailed(outcome.execution.error)
    Order.objects.filter(
        pk=event.payload["order_id"],
        organization_id=event.organization_id,
        post_processed_at__isnull=True,
    ).update(post_processed_at=timezone.now())


def run_event_pipeline(event: eventbus.Event) -> None:
    """Run the organization's enabled `event.<type>` pipeline for `event`, if it has one and
    the event was not produced by that pipeline's own chain (a pipeline that emits its own
    trigger type, directly or through others, would run forever)."""
    pipeline = selectors.enabled_pipeline(event.organization_id, EVENT_PREFIX + event.event_type)
    if pipeline is None:
        return
    if str(pipeline.pk) in cause_of(event.metadata, event.event_type).pipelines:
        logger.info(
            "pipeline %s not run for event %s: its own chain produced it",
            pipeline.pk,
            event.id,
            extra={"event_id": str(event.id), "pipeline_id": str(pipeline.pk)},
        )
        metrics.LOOPS_REFUSED.inc()
        return
    order_id = event.entity_id if event.entity_kind == "order" else None
    guard_ids(event, [(Order, order_id)])
    outcome = engine.run(
        pipeline, context=event_context(event), event_id=event.id, order_id=order_id
    )
    if outcome.failed:
        raise PipelineFailed(outcome.execution.error)


def event_pipeline_consumer() -> Consumer | None:
    """`pipeline-event-worker` for the PIPELINES_EVENT_TYPES set now (read when called, never
    cached), or None when no type is listed. `order.confirmed` is order-post-worker's."""
    types = tuple(t for t in pipeline_settings.EVENT_TYPES if t != "order.confirmed")
    if not types:
        return None
    return make_consumer(EVENT_WORKER, run_event_pipeline, events=types, runs_on="broker")


def register_event_pipeline_consumer() -> None:
    """Subscribe `pipeline-event-worker` to the types the settings list at registration time
    (this module's discovery at start-up; again after a settings change, e.g. in a test)."""
    registry.unregister(EVENT_WORKER)
    worker = event_pipeline_consumer()
    if worker is not None:
        registry.register(worker)


register_event_pipeline_consumer()
