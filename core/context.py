"""Ambient correlation context (request_id, trace_id, actor_id, source, causation_id) for the
current task.

Request middleware, workers and commands bind it; `eventbus.emit` copies it into event metadata so
one request can be followed through emit -> handler -> webhook -> logs. A handler run binds
`causation_id` to the event it handles, so whatever it emits names its cause.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

CORRELATION_KEYS = ("request_id", "trace_id", "actor_id", "source", "causation_id")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "deskcomm_correlation", default=None
)


def current() -> dict[str, str]:
    """The correlation ids bound for the running task (a copy; never None values)."""
    return dict(_context.get() or {})


def bind(**values: object) -> AbstractContextManager[dict[str, str]]:
    """Bind correlation ids for the duration of a `with` block (nested binds merge)."""
    return _bind(_context, "correlation", CORRELATION_KEYS, values)


@contextmanager
def _bind(
    var: contextvars.ContextVar[dict[str, Any] | None],
    kind: str,
    allowed: tuple[str, ...],
    values: dict[str, object],
    *,
    stringify: bool = True,
) -> Iterator[dict[str, Any]]:
    unknown = set(values) - set(allowed)
    if unknown:
        raise ValueError(f"unknown {kind} keys: {sorted(unknown)}; allowed: {allowed}")
    bound = {k: str(v) if stringify else v for k, v in values.items() if v is not None}
    merged = {**(var.get() or {}), **bound}
    token = var.set(merged)
    try:
        yield merged
    finally:
        var.reset(token)


# -- log-only context --------------------------------------------------------------------------
# Tenant and delivery ids for log records and Sentry tags. Kept apart from the correlation ids
# above because emit copies those into event metadata, and these must not travel that way.
LOG_KEYS = ("organization_id", "event_id", "delivery_id", "consumer")

_log_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "deskcomm_log_context", default=None
)


def current_log() -> dict[str, str]:
    """The log-only ids bound for the running task (a copy, as strings)."""
    return {k: str(v) for k, v in (_log_context.get() or {}).items()}


def bind_log(**values: object) -> AbstractContextManager[dict[str, Any]]:
    """Bind log-only ids (organization_id, event_id, delivery_id, consumer) for a `with` block.

    A new scope each time, so `annotate_log` inside it never leaks to the caller's scope. The
    values are stringified when a record reads them (`current_log`), not here.
    """
    return _bind(_log_context, "log", LOG_KEYS, values, stringify=False)


class run_scope:
    """Bind correlation ids and log ids together for one unit of work (a handler run).

    The drain worker enters one per delivery, so this is the cheap form of `bind(...)` plus
    `bind_log(...)`: no key validation (the caller passes known keys, values not None), no
    generator, and the log ids are stringified only when a record is logged.
    """

    __slots__ = ("_correlation", "_log", "_tokens")

    def __init__(self, correlation: dict[str, str], log: dict[str, object]) -> None:
        self._correlation = correlation
        self._log = log

    def __enter__(self) -> None:
        outer = _context.get()
        outer_log = _log_context.get()
        self._tokens = (
            _context.set({**outer, **self._correlation} if outer else self._correlation),
            _log_context.set({**outer_log, **self._log} if outer_log else self._log),
        )

    def __exit__(self, *exc_info: object) -> None:
        correlation, log = self._tokens
        _log_context.reset(log)
        _context.reset(correlation)


def annotate_log(**values: object) -> None:
    """Add ids to the innermost `bind_log` scope (e.g. the tenant once a request authenticates).

    Outside any scope it does nothing: there is no block whose end would unbind the ids.
    """
    scope = _log_context.get()
    if scope is not None:
        scope.update({k: str(v) for k, v in values.items() if v is not None and k in LOG_KEYS})
