"""Waiting for something to happen: a poll with a deadline, never a blind sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], bool], *, timeout: float, what: str | Callable[[], str]
) -> None:
    """Poll with a deadline (no blind sleeps). `what` may be a callable (e.g. process logs)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout}s waiting for {described}")
        time.sleep(0.05)
