"""Logging filter that copies the ambient correlation ids (deskcomm.context) onto log records."""

from __future__ import annotations

import logging

from deskcomm import context


class CorrelationFilter(logging.Filter):
    """Adds `request_id`, `trace_id`, `actor_id` and `source` to every record ("-" when unbound).

    Attach it to handlers (not loggers) so records from every logger get the fields, and format
    strings can name them (`%(request_id)s`).
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
        return True
