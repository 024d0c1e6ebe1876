"""Sentry error reporting, on only when SENTRY_DSN is set.

No personal data leaves: `send_default_pii` off (as `data_collection`), request bodies and
actor (dramatiq message) arguments never attached, no local variables, and `before_send` passes
every remaining field
through the same redaction as the logs (core.redaction). Health-check transactions are
dropped. Events carry tags for the tenant, the route and the event/delivery being processed.
"""

from __future__ import annotations

import logging
import re
from typing import Any, cast

import sentry_sdk
from django.conf import settings
from sentry_sdk.integrations.django import DjangoIntegration
from sentry_sdk.integrations.dramatiq import DramatiqIntegration
from sentry_sdk.integrations.logging import LoggingIntegration
from sentry_sdk.types import Event, Hint

from core import context
from core.logs.formatters import commit, service_name
from core.redaction import redact

# Envelope fields that are identifiers and timings, not data (redacting them would corrupt ids).
_STRUCTURAL = frozenset(
    {
        "event_id",
        "timestamp",
        "start_timestamp",
        "release",
        "environment",
        "platform",
        "sdk",
        "type",
        "level",
        "server_name",
        "transaction_info",
        "measurements",
        "modules",
        "fingerprint",
    }
)
_STRUCTURAL_CONTEXTS = frozenset({"trace", "runtime", "os", "device"})
_HEALTH_TRANSACTION = re.compile(r"/?api/v1/health/?$")


def init_sentry(**overrides: Any) -> bool:
    """Initialise the SDK when SENTRY_DSN is set; returns whether it did."""
    if not settings.SENTRY_DSN:
        return False
    sentry_sdk.init(
        dsn=settings.SENTRY_DSN,
        environment=settings.SENTRY_ENVIRONMENT,
        release=commit(),
        server_name=service_name(),
        integrations=[
            DjangoIntegration(transaction_style="url"),
            DramatiqIntegration(),
            LoggingIntegration(event_level=logging.ERROR),
        ],
        # The structured successor of send_default_pii=False (which this SDK version deprecates
        # and defaults to): no user info, no request or actor bodies, no SQL parameters, no
        # local variables.
        data_collection={
            "user_info": False,
            "http_bodies": [],
            "database_query_data": False,
            "stack_frame_variables": False,
        },
        traces_sample_rate=settings.SENTRY_TRACES_SAMPLE_RATE,
        before_send=before_send,
        before_send_transaction=before_send_transaction,
        **overrides,
    )
    return True


def before_send(event: Event, hint: Hint) -> Event:
    """Tag the event with the bound context, then redact it."""
    tags = cast(dict[str, Any], event.setdefault("tags", {}))
    # Log records' `extra=` ids (e.g. the dead-letter alert, logged outside the handler run).
    extra = cast(dict[str, Any], event.get("extra") or {})
    tags.update({k: str(extra[k]) for k in context.LOG_KEYS if extra.get(k) is not None})
    tags.update(context.current_log())
    tags.update({k: v for k, v in context.current().items() if k == "request_id"})
    if event.get("transaction"):
        tags.setdefault("route", event["transaction"])
    return scrub(event)


def before_send_transaction(event: Event, hint: Hint) -> Event | None:
    """Drop health probes (one every few seconds per container); redact the rest."""
    if _HEALTH_TRANSACTION.search(str(event.get("transaction", ""))):
        return None
    return scrub(event)


def scrub(event: Event) -> Event:
    """A copy of the event with personal data and secrets redacted from every data field."""
    scrubbed: dict[str, Any] = {}
    for key, value in event.items():
        if key in _STRUCTURAL:
            scrubbed[key] = value
        elif key == "contexts":
            scrubbed[key] = _scrub_contexts(value)
        elif key == "request":
            scrubbed[key] = _scrub_request(value)
        else:
            scrubbed[key] = redact(value)
    return cast(Event, scrubbed)


def _scrub_contexts(contexts: Any) -> dict[str, Any]:
    scrubbed = {}
    for name, value in contexts.items():
        if name in _STRUCTURAL_CONTEXTS:
            scrubbed[name] = value
        else:
            # Actor arguments (the dramatiq message) never leave, redacted or not.
            scrubbed[name] = redact({k: v for k, v in value.items() if k != "data"})
    return scrubbed


def _scrub_request(request: Any) -> dict[str, Any]:
    kept = {k: v for k, v in request.items() if k not in {"data", "cookies", "query_string"}}
    return dict(redact(kept))
