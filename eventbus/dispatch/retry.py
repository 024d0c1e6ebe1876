"""The retry table: how long to wait after the n-th failed attempt, and when to give up.

Pure functions (no database) so the policy is tested on its own. The default table is the seed's:

    attempt 1 failed -> wait 30 s
    attempt 2 failed -> wait 1 min
    attempt 3 failed -> wait 2 min
    attempt 4 failed -> wait 5 min
    attempt 5 failed -> wait 10 min
    attempt 6 failed -> wait 30 min
    attempt 7 failed -> wait 1 h
    attempt 8 failed -> dead (default max_attempts = 8; total wait before death ~1h48m + jitter)

Attempts past the end of the table reuse its last step (2 h) for consumers allowed more attempts.
Every step gets 0-30% extra random delay (jitter) so failed batches do not retry in lockstep.

`decide` is the one decision every failed attempt goes through (a handler's exception here, a
publish to the broker here, a webhook's response in webhooks/outcome.py): permanent or out of
attempts -> dead, else retry after the table's delay (or the wait the failure asked for).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from core.redaction import redact_text
from eventbus.store import tracebacks
from eventbus.store.errors import PermanentError


def backoff_seconds(
    attempt: int,
    *,
    schedule: Sequence[float],
    jitter: float,
    rand: Callable[[], float] = random.random,
) -> float:
    """Delay before the next try after `attempt` (1-based) failed, jitter included."""
    if attempt < 1:
        raise ValueError("attempt is 1-based")
    if not schedule:
        raise ValueError("the retry schedule is empty")
    step = float(schedule[min(attempt, len(schedule)) - 1])
    return step * (1.0 + jitter * rand())


@dataclass(frozen=True)
class Verdict:
    """What to do with a failed attempt: retry after `delay` seconds, or dead-letter now."""

    dead: bool
    delay: float
    error_class: str
    error: str
    traceback: str = ""  # the handler's, bounded and redacted (eventbus.store.tracebacks)


def decide(
    attempt: int,
    *,
    max_attempts: int,
    permanent: bool,
    schedule: Sequence[float],
    jitter: float,
    error_class: str,
    error: str,
    traceback: str = "",
    delay: float | None = None,
    rand: Callable[[], float] = random.random,
) -> Verdict:
    """The one retry decision, for every kind of failed attempt (`attempt` is 1-based): dead now
    when the failure is permanent or that was the last attempt, else retry after the table's
    delay, or after `delay` when the failure named its own wait (a webhook's Retry-After).
    Each caller classifies its own failure (exception, response, publish) into these inputs."""
    dead = permanent or attempt >= max_attempts
    if dead:
        wait = 0.0
    elif delay is None:
        wait = backoff_seconds(attempt, schedule=schedule, jitter=jitter, rand=rand)
    else:
        wait = delay
    return Verdict(dead, wait, error_class, error, traceback)


def judge_failure(
    exc: BaseException,
    *,
    attempt: int,
    max_attempts: int,
    schedule: Sequence[float],
    jitter: float,
    rand: Callable[[], float] = random.random,
) -> Verdict:
    """A handler's exception: a `PermanentError` is dead at once, anything else is retried."""
    return decide(
        attempt,
        max_attempts=max_attempts,
        permanent=isinstance(exc, PermanentError),
        schedule=schedule,
        jitter=jitter,
        error_class=type(exc).__name__,
        # Redacted as the logs are (core.redaction): the console shows it beside the traceback.
        error=redact_text(f"{type(exc).__name__}: {exc}")[:4000],
        traceback=tracebacks.capture(exc),
        rand=rand,
    )


def judge_publish_failure(
    exc: BaseException,
    *,
    failures: int,
    max_failures: int,
    schedule: Sequence[float],
    jitter: float,
    rand: Callable[[], float] = random.random,
) -> Verdict:
    """The relay could not hand a delivery to the broker for the `failures`-th time.

    Back off like any failed attempt; at `max_failures` (OUTBOX_MAX_ATTEMPTS) the delivery is dead
    with an error that says why, so an operator can reprocess it once the broker is back.
    """
    decided = decide(
        failures,
        max_attempts=max_failures,
        permanent=False,
        schedule=schedule,
        jitter=jitter,
        error_class="PublishFailed",
        error="",
        rand=rand,
    )
    cause = f"{type(exc).__name__}: {exc}"[:2000]
    if decided.dead:
        why = f"could not publish to the job broker {failures} times"
        error = f"PublishFailed: {why} (OUTBOX_MAX_ATTEMPTS={max_failures}); last error: {cause}"
    else:
        why = f"job broker unreachable (failure {failures}/{max_failures})"
        error = f"PublishFailed: {why}: {cause}"
    return replace(decided, error=error)
