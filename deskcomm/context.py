"""Ambient correlation context (request_id, trace_id, actor_id, source) for the current task.

Request middleware, workers and commands bind it; `eventbus.emit` copies it into event metadata so
one request can be followed through emit -> handler -> webhook -> logs.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

CORRELATION_KEYS = ("request_id", "trace_id", "actor_id", "source")

_context: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "deskcomm_correlation", default=None
)


def current() -> dict[str, str]:
    """The correlation ids bound for the running task (a copy; never None values)."""
    return dict(_context.get() or {})


@contextmanager
def bind(**values: object) -> Iterator[dict[str, str]]:
    """Bind correlation ids for the duration of a `with` block (nested binds merge)."""
    unknown = set(values) - set(CORRELATION_KEYS)
    if unknown:
        raise ValueError(
            f"unknown correlation keys: {sorted(unknown)}; allowed: {CORRELATION_KEYS}"
        )
    merged = {**(_context.get() or {}), **{k: str(v) for k, v in values.items() if v is not None}}
    token = _context.set(merged)
    try:
        yield merged
    finally:
        _context.reset(token)
