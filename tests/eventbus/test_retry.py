"""The retry table and the one retry decision, without a database."""

from __future__ import annotations

from typing import Any

import pytest

from eventbus.dispatch import retry
from eventbus.dispatch.retry import Verdict, backoff_seconds, judge_failure
from eventbus.store.errors import PermanentError

SEED_SCHEDULE = [30, 60, 120, 300, 600, 1800, 3600, 7200]
# Expected base delay after attempt n failed, n = 1..10 (past the table: its last step).
EXPECTED_BASE = {1: 30, 2: 60, 3: 120, 4: 300, 5: 600, 6: 1800, 7: 3600, 8: 7200, 9: 7200, 10: 7200}


@pytest.mark.parametrize(("attempt", "base"), sorted(EXPECTED_BASE.items()))
def test_backoff_bounds_include_jitter(attempt: int, base: int) -> None:
    low = backoff_seconds(attempt, schedule=SEED_SCHEDULE, jitter=0.3, rand=lambda: 0.0)
    high = backoff_seconds(attempt, schedule=SEED_SCHEDULE, jitter=0.3, rand=lambda: 0.999999)
    assert low == base
    assert base * 1.29 < high < base * 1.3


def test_jitter_spreads_retries() -> None:
    values = {backoff_seconds(3, schedule=SEED_SCHEDULE, jitter=0.3) for _ in range(50)}
    assert len(values) > 1
    assert all(120 <= v <= 156 for v in values)


def test_attempt_is_one_based() -> None:
    with pytest.raises(ValueError, match="1-based"):
        backoff_seconds(0, schedule=SEED_SCHEDULE, jitter=0.3)


def test_transient_error_retries_until_the_last_attempt() -> None:
    verdict = judge_failure(
        RuntimeError("timeout"), attempt=7, max_attempts=8, schedule=SEED_SCHEDULE, jitter=0.0
    )
    assert not verdict.dead
    assert verdict.delay == 3600
    assert verdict.error_class == "RuntimeError"
    assert verdict.error == "RuntimeError: timeout"


def test_last_attempt_is_dead() -> None:
    verdict = judge_failure(
        RuntimeError("timeout"), attempt=8, max_attempts=8, schedule=SEED_SCHEDULE, jitter=0.3
    )
    assert verdict.dead


def test_permanent_error_is_dead_at_once() -> None:
    verdict = judge_failure(
        PermanentError("bad phone"), attempt=1, max_attempts=8, schedule=SEED_SCHEDULE, jitter=0.3
    )
    assert verdict.dead
    assert verdict.error_class == "PermanentError"


def test_per_consumer_attempts() -> None:
    third = judge_failure(
        RuntimeError("x"), attempt=3, max_attempts=3, schedule=SEED_SCHEDULE, jitter=0.3
    )
    second = judge_failure(
        RuntimeError("x"), attempt=2, max_attempts=3, schedule=SEED_SCHEDULE, jitter=0.3
    )
    assert third.dead and not second.dead


def decide(attempt: int, **overrides: object) -> Verdict:
    """The one retry decision, with the seed's table and no jitter unless overridden."""
    inputs: dict[str, Any] = {
        "max_attempts": 8,
        "permanent": False,
        "schedule": SEED_SCHEDULE,
        "jitter": 0.0,
        "error_class": "Boom",
        "error": "Boom: no",
        **overrides,
    }
    return retry.decide(attempt, **inputs)


def test_the_decision_retries_after_the_tables_step_until_the_last_attempt() -> None:
    assert decide(1) == Verdict(False, 30.0, "Boom", "Boom: no")
    assert decide(7) == Verdict(False, 3600.0, "Boom", "Boom: no")
    assert decide(8) == Verdict(True, 0.0, "Boom", "Boom: no")
    assert decide(3, max_attempts=3).dead


def test_a_permanent_failure_is_dead_at_the_first_attempt() -> None:
    assert decide(1, permanent=True, traceback="tb") == Verdict(True, 0.0, "Boom", "Boom: no", "tb")


def test_a_delay_the_failure_asked_for_replaces_the_table_but_not_the_last_attempt() -> None:
    assert decide(1, delay=5.0).delay == 5.0
    assert decide(8, delay=5.0) == Verdict(True, 0.0, "Boom", "Boom: no")
    assert decide(1, permanent=True, delay=5.0).delay == 0.0


def test_jitter_comes_from_the_table() -> None:
    assert decide(2, jitter=0.3, rand=lambda: 0.5).delay == pytest.approx(60 * 1.15)


def test_a_publish_failure_backs_off_then_dies_with_an_error_that_says_why() -> None:
    exc = ConnectionError("refused")
    first = retry.judge_publish_failure(
        exc, failures=1, max_failures=3, schedule=SEED_SCHEDULE, jitter=0.0
    )
    last = retry.judge_publish_failure(
        exc, failures=3, max_failures=3, schedule=SEED_SCHEDULE, jitter=0.0
    )
    assert (first.dead, first.delay, first.error_class) == (False, 30.0, "PublishFailed")
    assert first.error == (
        "PublishFailed: job broker unreachable (failure 1/3): ConnectionError: refused"
    )
    assert (last.dead, last.delay) == (True, 0.0)
    assert last.error == (
        "PublishFailed: could not publish to the job broker 3 times (OUTBOX_MAX_ATTEMPTS=3); "
        "last error: ConnectionError: refused"
    )
