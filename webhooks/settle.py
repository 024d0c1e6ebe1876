"""Settle finished webhook attempts: the bus's ack/nack, then the webhook bookkeeping (attempt
log, consecutive-failure counters, auto-disable, and `webhook.delivery_failed` for each delivery
that finally failed: dead-lettered after an attempt) in one transaction.

The ack and nack run as their own statements, like the generic dispatcher's, so two workers
settling deliveries of the same events never hold event-row locks across statements (no
deadlock). Subscription rows are locked in id order for the same reason.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

import eventbus
from eventbus.dispatch import claim as claims
from eventbus.dispatch import settle as bus_settle
from eventbus.store.conf import bus_settings
from eventbus.store.event import Event
from webhooks import metrics
from webhooks.conf import webhook_settings
from webhooks.models import Attempt
from webhooks.outcome import Decision, Policy
from webhooks.sender import AttemptResult

logger = logging.getLogger(__name__)

SYSTEM_ACTOR = "system:webhooks"
FAILED_TYPE = "webhook.delivery_failed"

# Per subscription, in completion order: a success resets the counter to the failures after it;
# otherwise the failures add up. A healthy subscription whose counter is already 0 is neither
# locked nor written (the common case costs no row update). Rows are locked in id order.
COUNT_FAILURES_SQL = """
WITH v AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(reset)s::bool[], %(failures)s::int[])
           AS v(id, reset, failures)
), locked AS MATERIALIZED (
    SELECT s.id FROM webhooks_subscription s JOIN v ON v.id = s.id
     WHERE NOT v.reset OR v.failures > 0 OR s.consecutive_failures <> 0
     ORDER BY s.id
       FOR UPDATE OF s
)
UPDATE webhooks_subscription s
   SET consecutive_failures = CASE WHEN v.reset THEN v.failures
                                   ELSE s.consecutive_failures + v.failures END
  FROM v JOIN locked l ON l.id = v.id
 WHERE s.id = v.id
RETURNING s.id, s.consecutive_failures, s.enabled
"""


@dataclass(frozen=True)
class Finished:
    """A delivery the worker is done with: its claim, event, attempt (None: nothing was sent)."""

    token: uuid.UUID
    event: Event
    subscription_id: uuid.UUID | None
    result: AttemptResult | None
    decision: Decision


def policy() -> Policy:
    return Policy(
        schedule=bus_settings.RETRY_SCHEDULE,
        jitter=bus_settings.RETRY_JITTER,
        max_retry_after=webhook_settings.MAX_RETRY_AFTER,
    )


def settle(finished: Sequence[Finished], *, worker_id: str) -> None:
    """The bus's settlement per claim token, then the attempt log and the subscriptions' health."""
    settlements = bus_settle.by_token((f.token, f.event) for f in finished)
    for f in finished:
        settlement = settlements[f.token]
        if f.decision.verdict is None:
            settlement.done.append(f.event.delivery_id)
        else:
            duration = f.result.duration_ms if f.result else None
            settlement.failures.append(
                claims.Failure(f.event.delivery_id, f.decision.verdict, duration)
            )
    for settlement in settlements.values():
        bus_settle.settle(settlement, worker_id=worker_id)
    metrics.count_attempts(f.result.status_code for f in finished if f.result is not None)
    with transaction.atomic():
        _log_attempts(finished)
        _emit_final_failures(finished)
        _update_health(finished)


def _log_attempts(finished: Sequence[Finished]) -> None:
    Attempt.objects.bulk_create(
        [
            Attempt(
                delivery_id=f.event.delivery_id,
                subscription_id=f.subscription_id,
                organization_id=f.event.organization_id,
                attempt=f.event.attempt,
                webhook_id=f.result.webhook_id,
                url=f.result.url,
                status_code=f.result.status_code,
                duration_ms=f.result.duration_ms,
                response_excerpt=f.result.excerpt,
                error_class=f.result.error_class,
                error=f.result.error,
                created_at=f.result.started_at,
            )
            for f in finished
            if f.result is not None and f.subscription_id is not None
        ]
    )


def _emit_final_failures(finished: Sequence[Finished]) -> None:
    """`webhook.delivery_failed` (seed 000 §3) for each delivery dead after an attempt to send.

    Ids, the attempt number, the error's class and the HTTP status only: an error text may quote
    the endpoint's URL (which can hold its credentials) or its answer. Never for the failure of
    a `webhook.delivery_failed` itself (a failing endpoint subscribed to it would feed itself),
    nor for a subscription disabled or deleted before sending (nothing was attempted). One event
    per delivery and attempt (a resent delivery that fails again reports again).
    """
    for f in finished:
        verdict = f.decision.verdict
        if (
            verdict is None
            or not verdict.dead
            or f.subscription_id is None
            or f.result is None
            or f.event.event_type == FAILED_TYPE
        ):
            continue
        payload = {
            "subscription_id": str(f.subscription_id),
            "event_id": str(f.event.id),
            "event_type": f.event.event_type,
            "delivery_id": f.event.delivery_id,
            "attempt": f.event.attempt,
            "error": verdict.error_class,
            "status_code": f.result.status_code,
        }
        eventbus.emit(
            FAILED_TYPE,
            organization=f.event.organization_id,
            entity_kind="webhook_subscription",
            entity_id=f.subscription_id,
            payload=payload,
            idempotency_key=f"{FAILED_TYPE}:{f.event.delivery_id}:{f.event.attempt}",
            causation_id=f.event.id,
        )


def _update_health(finished: Sequence[Finished]) -> None:
    counts = _failure_counts([f for f in finished if f.result is not None])
    if not counts:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            COUNT_FAILURES_SQL,
            {
                "ids": list(counts),
                "reset": [reset for reset, _ in counts.values()],
                "failures": [n for _, n in counts.values()],
            },
        )
        rows = cursor.fetchall()
    threshold = webhook_settings.DISABLE_AFTER_FAILURES
    last_errors = {f.subscription_id: f.decision.verdict for f in finished if f.decision.verdict}
    gone = {
        f.subscription_id: f.decision.disable_reason for f in finished if f.decision.disable_reason
    }
    for sub_id, failures, enabled in rows:
        reason = gone.get(sub_id) or (
            f"{failures} consecutive failed deliveries" if failures >= threshold else ""
        )
        if enabled and reason:
            verdict = last_errors.get(sub_id)
            _auto_disable(sub_id, reason, verdict.error if verdict else "")


def _failure_counts(attempted: Sequence[Finished]) -> dict[uuid.UUID, tuple[bool, int]]:
    """Per subscription: (a success happened, failures since the last success or in total)."""
    counts: dict[uuid.UUID, tuple[bool, int]] = {}
    for f in attempted:
        if f.subscription_id is None:
            continue
        reset, n = counts.get(f.subscription_id, (False, 0))
        counts[f.subscription_id] = (True, 0) if f.decision.ok else (reset, n + 1)
    return counts


def _auto_disable(subscription_id: uuid.UUID, reason: str, last_error: str) -> None:
    from webhooks import services

    if services.subscription_disable(
        subscription_id=subscription_id, actor=SYSTEM_ACTOR, reason=reason, last_error=last_error
    ):
        logger.error(
            "webhook subscription %s disabled: %s (last error: %s)",
            subscription_id,
            reason,
            last_error,
            extra={"subscription_id": str(subscription_id)},
        )
        _mail_admins(subscription_id, reason, last_error)


def _mail_admins(subscription_id: uuid.UUID, reason: str, last_error: str) -> None:
    from django.core.mail import mail_admins

    if settings.ADMINS:
        mail_admins(
            f"Webhook subscription {subscription_id} disabled",
            f"Reason: {reason}\nLast error: {last_error}\nRe-enable it explicitly once fixed.",
            fail_silently=True,
        )
