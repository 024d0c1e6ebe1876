"""Logging filters: correlation ids (core.context) on every record, and redaction of args."""

from __future__ import annotations

import logging
from typing import Any

from core import context
from core.redaction import redact


class CorrelationFilter(logging.Filter):
    """Adds `request_id`, `trace_id`, `actor_id` and `source` to every record ("-" when unbound),
    and the bound log ids (`organization_id`, `event_id`, `delivery_id`, `consumer`) when present.

    Attach it to handlers (not loggers) so records from every logger get the fields, and format
    strings can name them (`%(request_id)s`). Values a call passes in `extra=` win.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        bound = context.current()
        if "request_id" not in bound:
            # django.request logs a failed response after the middleware unbound the context,
            # but hands over the request, which carries its id.
            request_id = getattr(getattr(record, "request", None), "request_id", None)
            bound = {**bound, "request_id": request_id} if request_id else bound
        for key in context.CORRELATION_KEYS:
            if not hasattr(record, key):
                setattr(record, key, bound.get(key, "-"))
        for key, value in context.current_log().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class RedactionFilter(logging.Filter):
    """Redacts the record's arguments (by key and pattern) before any formatter renders them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = _redacted_args(record.args)
        return True


def _redacted_args(args: Any) -> Any:
    if isinstance(args, dict):
        return redact(args)
    return tuple(redact(list(args)))
