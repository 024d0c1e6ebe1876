"""What a webhook attempt means for its delivery and its subscription (pure: no database).

    2xx                      -> done; the subscription's consecutive failures reset to 0
    410 Gone                 -> dead now, and the subscription is disabled at once
    refused (SSRF guard)     -> dead now: retrying cannot make the address acceptable
    URL the transport cannot -> dead now (InvalidURL, UnsupportedProtocol): a stored URL from
      send                      before today's checks never becomes sendable by waiting
    429 / 503 + Retry-After  -> retry after that many seconds, capped (WEBHOOKS_MAX_RETRY_AFTER)
    anything else            -> retry with the bus's backoff; dead after max_attempts. This
                                includes network errors and an unexpected exception in the
                                sender (recorded under its class name: a deploy may fix it)
Every failure except "the subscription is disabled" counts towards auto-disable, including an
attempt the gate held back (`CircuitOpen`, webhooks.circuit: nothing was sent), retried like
any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eventbus.dispatch import retry
from eventbus.dispatch.retry import Verdict
from webhooks.sender import AttemptResult

GONE = 410
RETRY_AFTER_STATUSES = frozenset({429, 503})
PERMANENT_ERRORS = frozenset({"BlockedDestination", "InvalidURL", "UnsupportedProtocol"})


@dataclass(frozen=True)
class Decision:
    """A failed attempt's verdict (None on success) and whether to disable the subscription."""

    verdict: Verdict | None
    disable_reason: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict is None


@dataclass(frozen=True)
class Policy:
    """The retry knobs, read once per settle from the bus and webhook settings."""

    schedule: Sequence[float]
    jitter: float
    max_retry_after: float


def judge(result: AttemptResult, *, attempt: int, max_attempts: int, policy: Policy) -> Decision:
    """Classify one attempt (attempt is 1-based); the retry decision is the bus's
    (eventbus.dispatch.retry.decide)."""
    if result.ok:
        return Decision(None)
    error_class = result.error_class or "HTTPStatus"
    gone = result.status_code == GONE
    verdict = retry.decide(
        attempt,
        max_attempts=max_attempts,
        permanent=gone or error_class in PERMANENT_ERRORS,
        schedule=policy.schedule,
        jitter=policy.jitter,
        error_class=error_class,
        error=result.error or f"HTTP {result.status_code}",
        delay=_asked_delay(result, policy),
    )
    return Decision(verdict, disable_reason="the endpoint answered 410 Gone" if gone else "")


def failed_attempt(
    error_class: str, error: str, *, attempt: int, max_attempts: int, policy: Policy
) -> Decision:
    """An attempt that got no response to judge (it raised, or ran past its timeout): a
    transient failure of the delivery, retried per the table."""
    verdict = retry.decide(
        attempt,
        max_attempts=max_attempts,
        permanent=False,
        schedule=policy.schedule,
        jitter=policy.jitter,
        error_class=error_class,
        error=error[:4000],
    )
    return Decision(verdict)


def _asked_delay(result: AttemptResult, policy: Policy) -> float | None:
    """The wait a 429/503 asked for (Retry-After), capped; None: the table's."""
    if result.status_code in RETRY_AFTER_STATUSES and result.retry_after is not None:
        return min(max(result.retry_after, 1.0), policy.max_retry_after)
    return None


def disabled_subscription() -> Decision:
    """The subscription was disabled or deleted: nothing is sent and the delivery dies."""
    error = "SubscriptionDisabled: the subscription is disabled or deleted; nothing was sent"
    return Decision(Verdict(True, 0.0, "SubscriptionDisabled", error))
