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
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.redaction import redact_text
from eventbus import tracebacks
from eventbus.errors import PermanentError


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
    traceback: str = ""  # the handler's, bounded and redacted (eventbus.tracebacks)


def judge_failure(
    exc: BaseException,
    *,
    attempt: int,
    max_attempts: int,
    schedule: Sequence[float],
    jitter: float,
    rand: Callable[[], float] = random.random,
) -> Verdict:
    """Classify an exception: permanent or out of attempts -> dead; anything else -> retry later."""
    # Redacted as the logs are (core.redaction): the console shows it beside the traceback.
    error = redact_text(f"{type(exc).__name__}: {exc}")[:4000]
    error_class = type(exc).__name__
    trace = tracebacks.capture(exc)
    if isinstance(exc, PermanentError) or attempt >= max_attempts:
        return Verdict(dead=True, delay=0.0, error_class=error_class, error=error, traceback=trace)
    delay = backoff_seconds(attempt, schedule=schedule, jitter=jitter, rand=rand)
    return Verdict(dead=False, delay=delay, error_class=error_class, error=error, traceback=trace)


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
    cause = f"{type(exc).__name__}: {exc}"[:2000]
    if failures >= max_failures:
        error = (
            f"PublishFailed: could not publish to the job broker {failures} times "
            f"(OUTBOX_MAX_ATTEMPTS={max_failures}); last error: {cause}"
        )
        return Verdict(dead=True, delay=0.0, error_class="PublishFailed", error=error)
    delay = backoff_seconds(failures, schedule=schedule, jitter=jitter, rand=rand)
    error = f"PublishFailed: job broker unreachable (failure {failures}/{max_failures}): {cause}"
    return Verdict(dead=False, delay=delay, error_class="PublishFailed", error=error)
