"""A failing endpoint gets one request at a time, and no more failures than disable it.

One `Gate` per subscription and process (the worker's sending threads share it). It knows the
failures in a row (the database's counter when the worker loads the subscription, then the
outcome of each request this process sends) and the requests in flight:

- healthy (no failure yet): requests go out as the worker allows, but never so many at once that,
  all failing, they would pass the disable threshold (WEBHOOKS_DISABLE_AFTER_FAILURES);
- failing: one request at a time probes the endpoint; the others wait for its answer (a success
  opens the gate again);
- at the threshold: nothing more is sent. The attempt is recorded as not sent (`CircuitOpen`) and
  retried later; the settle that counted the threshold disables the subscription, and its
  retries then die unsent.

So a burst of events to a dead endpoint costs it at most the threshold of requests from one
process (before, every event already claimed was sent: 14 at once meant 14 failing requests).
"""

from __future__ import annotations

import threading
import uuid

_gates: dict[uuid.UUID, Gate] = {}
_gates_lock = threading.Lock()


class Gate:
    """Failures in a row and requests in flight of one subscription, in this process."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.failures = 0
        self.in_flight = 0
        self._version: object = None

    def sync(self, failures: int, version: object) -> None:
        """The database's view, read when the worker loads the subscription.

        `version` (the row's `updated_at`) moves on an operator change (re-enable, edit), which
        resets the count; otherwise the higher count wins (this process may know of failures the
        database has not been told yet).
        """
        with self._changed:
            self.failures = failures if version != self._version else max(self.failures, failures)
            self._version = version
            self._changed.notify_all()

    def admit(self, threshold: int) -> bool:
        """Wait for a sending slot; False (send nothing) once the failures reach the threshold."""
        with self._changed:
            while not may_send(self.failures, self.in_flight, threshold):
                if self.failures >= threshold:
                    return False
                self._changed.wait()
            self.in_flight += 1
            return True

    def done(self, *, ok: bool) -> None:
        """An admitted request finished (`ok`: a 2xx answer)."""
        with self._changed:
            self.in_flight -= 1
            self.failures = 0 if ok else self.failures + 1
            self._changed.notify_all()


def may_send(failures: int, in_flight: int, threshold: int) -> bool:
    """Whether one more request may go out now (pure: the rule in one place)."""
    if failures + in_flight >= threshold:
        return False  # all in flight failing would pass the threshold
    return failures == 0 or in_flight == 0  # a failing endpoint: one probe at a time


def gate_for(subscription_id: uuid.UUID) -> Gate:
    """This process's gate of a subscription (created on first use)."""
    with _gates_lock:
        gate = _gates.get(subscription_id)
        if gate is None:
            gate = _gates[subscription_id] = Gate()
        return gate
