"""Log formatters: JSON lines (production default) and a plain console line (`LOG_FORMAT=plain`).

Both redact what they print (core.redaction): the JSON formatter every field but the
time/level/logger ones, the plain one the whole line. Each record also names the process
(`service`: DESKCOMM_SERVICE, else derived from the command line) and the code (`commit`:
GIT_COMMIT), so lines from every container can be searched together.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

from core.redaction import redact, redact_text

_TRUSTED_FIELDS = frozenset({"time", "level", "logger", "service", "commit"})


def service_name(argv: list[str] | None = None) -> str:
    """DESKCOMM_SERVICE, else "web" under gunicorn, else the manage.py command, else the script."""
    explicit = os.environ.get("DESKCOMM_SERVICE")
    if explicit:
        return explicit
    argv = sys.argv if argv is None else argv
    program = os.path.basename(argv[0]) if argv else "python"
    if argv and "gunicorn" in argv[0]:  # the gunicorn script, or `python -m gunicorn`
        return "web"
    if program == "manage.py" and len(argv) > 1:
        return argv[1]
    return program.removesuffix(".py") or "python"


def commit() -> str:
    """The deployed commit (GIT_COMMIT, set at image build), "unknown" when not set."""
    return os.environ.get("GIT_COMMIT") or "unknown"


class JsonFormatter(_JsonFormatter):
    """One JSON object per line: time, level, logger, message, service, commit, then context."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault(
            "rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"}
        )
        kwargs.setdefault("static_fields", {"service": service_name(), "commit": commit()})
        kwargs.setdefault("reserved_attrs", _RESERVED)
        super().__init__(*args, **kwargs)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        # ISO 8601 in UTC with milliseconds: sortable and unambiguous across hosts.
        import datetime as dt

        moment = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        return {
            key: value if key in _TRUSTED_FIELDS else redact({key: value})[key]
            for key, value in log_data.items()
            if value != "-"  # unbound correlation ids: absent rather than a placeholder
        }


class PlainFormatter(logging.Formatter):
    """A human-readable line for local development; redacted like the JSON one."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


# Standard LogRecord attributes left out of the JSON (the useful ones are renamed fields).
_RESERVED = [
    "args",
    "created",
    "exc_info",  # rendered (and redacted) as the formatted traceback instead
    "exc_text",
    "filename",
    "funcName",
    "levelno",
    "lineno",
    "module",
    "msecs",
    "msg",
    "pathname",
    "process",
    "processName",
    "relativeCreated",
    "stack_info",
    "thread",
    "threadName",
    "taskName",
    "request",  # django.request passes the HttpRequest object; its id is already a field
    "server_time",
]
