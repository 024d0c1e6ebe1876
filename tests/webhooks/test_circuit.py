"""The gate's rule (pure) and its bookkeeping: healthy, probing, held back, reset."""

from __future__ import annotations

import pytest

from webhooks.circuit import Gate, may_send


@pytest.mark.parametrize(
    ("failures", "in_flight", "allowed"),
    [
        (0, 0, True),
        (0, 9, True),  # healthy: up to the threshold in flight
        (0, 10, False),  # ten in flight could all fail: no eleventh
        (1, 0, True),  # failing: one probe...
        (1, 1, False),  # ...at a time
        (9, 0, True),  # the tenth may still go
        (10, 0, False),  # at the threshold: nothing
    ],
)
def test_may_send(failures: int, in_flight: int, allowed: bool) -> None:
    assert may_send(failures, in_flight, threshold=10) is allowed


def test_outcomes_count_and_an_operator_change_resets() -> None:
    gate = Gate()
    gate.sync(0, "v1")
    for _ in range(3):
        assert gate.admit(3)
        gate.done(ok=False)
    assert not gate.admit(3)  # held back: nothing is sent
    gate.sync(0, "v1")  # the database has not caught up: this process's count stands
    assert gate.failures == 3
    gate.sync(0, "v2")  # re-enabled (the row changed): start again
    assert gate.admit(3)
    gate.done(ok=True)
    assert gate.failures == 0
