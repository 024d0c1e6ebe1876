"""One webhook HTTP attempt: build the body once, sign those bytes, POST them as is, and record
what the receiver answered (status, duration, at most 2 KiB of the body, error class).

`build_client` is core.http's guarded client with the webhook knobs (timeouts, the private
targets switch). `send` never raises: a URL the client cannot send, a refused address
(core.http.BlockedDestination), a network error and even a bug in this code all come back as an
AttemptResult with `error_class` and `error`, for webhooks.outcome to judge. A raised exception
would leave its delivery claimed until the lease ran out, and could take the sending thread with
it.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpcore
import httpx
from django.utils import timezone

from core.http import Resolver, guarded_client, retry_after_seconds, system_resolver
from eventbus.store.event import Event
from webhooks import signing, ssrf
from webhooks.conf import webhook_settings
from webhooks.selectors import Target

logger = logging.getLogger(__name__)

CIRCUIT_OPEN = "CircuitOpen"  # error class of an attempt the gate held back (nothing was sent)
UNUSABLE = "SecretUnavailable"  # the target's secret cannot be decrypted: nothing was sent
EXCERPT_BYTES = 2048
# Read at most this much of a response so the connection can be reused; past it, close it.
DRAIN_BYTES = 64 * 1024
# The error class of a stored URL the transport cannot send (webhooks.outcome: permanent).
INVALID_URL = "InvalidURL"
# Failures that are the target's or the network's, not ours: recorded without a traceback.
# A refused address is core.http.BlockedDestination, an httpx.ConnectError recorded under its own
# class name, which webhooks.outcome reads as permanent.
EXPECTED_ERRORS = (httpx.HTTPError, httpx.InvalidURL)


@dataclass(frozen=True)
class AttemptResult:
    """What one attempt produced; `ok` is a 2xx answer."""

    webhook_id: uuid.UUID
    url: str
    started_at: dt.datetime
    duration_ms: int
    status_code: int | None = None
    excerpt: str = ""
    error_class: str = ""
    error: str = ""
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def timeouts() -> httpx.Timeout:
    """Connect quickly; the rest of the request shares the total budget (read at call time)."""
    total = webhook_settings.TIMEOUT
    connect = min(webhook_settings.CONNECT_TIMEOUT, total)
    return httpx.Timeout(total, connect=connect, pool=total)


def build_client(
    *,
    max_connections: int = 100,
    resolver: Resolver = system_resolver,
    backend: httpcore.NetworkBackend | None = None,
) -> httpx.Client:
    """The guarded client for webhooks: WEBHOOKS_TIMEOUT, WEBHOOKS_ALLOW_PRIVATE_TARGETS (named
    in refusals); `resolver` and `backend` are for tests (core.http.guarded_client)."""
    return guarded_client(
        timeout=timeouts(),
        allow_private=ssrf.allow_private_targets(),
        allow_private_setting=ssrf.ALLOW_PRIVATE_SETTING,
        max_connections=max_connections,
        resolver=resolver,
        backend=backend,
    )


def provenance_for(metadata: dict[str, Any]) -> dict[str, str] | None:
    """Who produced the event, as signed in the body: the door (`api`, `pipeline`, `app`) and the
    producer (`api_key:<prefix>`, `pipeline:<id>` with its execution, `app:<label>`, `system`),
    so a receiver can tell an integrator's event from the platform's. The platform's internal
    component names stay out."""
    found = metadata.get("provenance")
    if not isinstance(found, dict):
        return None
    shown = {k: str(found[k]) for k in ("door", "producer", "execution_id") if k in found}
    return shown or None


def body_for(event: Event) -> bytes:
    """The JSON body of an event, serialised once (these exact bytes are signed and sent)."""
    document: dict[str, Any] = {
        "event_id": str(event.id),
        "type": event.event_type,
        "occurred_at": event.created_at.isoformat(),
        "organization_id": str(event.organization_id),
        "entity_kind": event.entity_kind,
        "entity_id": str(event.entity_id) if event.entity_id else None,
        "schema_version": event.metadata.get("schema_version"),
        "request_id": event.metadata.get("request_id"),
        "provenance": provenance_for(event.metadata),
        "payload": event.payload,
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def headers_for(target: Target, event: Event, body: bytes, *, timestamp: int) -> dict[str, str]:
    """Our X-Webhook-* headers and the Standard Webhooks ones (same id, time and signature)."""
    msg_id = str(signing.delivery_id(event.id, target.subscription_id))
    sig = signing.signature(target.keys, msg_id=msg_id, timestamp=timestamp, body=body)
    return {
        "Content-Type": "application/json",
        "User-Agent": webhook_settings.USER_AGENT,
        "X-Webhook-Delivery": msg_id,
        "X-Webhook-Attempt": str(event.attempt),
        "X-Webhook-Event": event.event_type,
        "X-Webhook-Timestamp": str(timestamp),
        "X-Webhook-Signature": sig,
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sig,
        **_correlation_headers(event),
    }


def _correlation_headers(event: Event) -> dict[str, str]:
    """X-Correlation-ID (the trace id, else the request id, as GET /api/outbox shows it) and
    X-Causation-ID (the event that caused this one), when the event carries them."""
    meta = event.metadata
    found = {
        "X-Correlation-ID": meta.get("trace_id") or meta.get("request_id"),
        "X-Causation-ID": meta.get("causation_id"),
    }
    return {name: str(value) for name, value in found.items() if value}


def send(client: httpx.Client, target: Target, event: Event) -> AttemptResult:
    """POST the event to the target once, when its gate lets it (`webhooks.circuit`: one request
    at a time to a failing endpoint, none past the disable threshold); never raises (every
    failure is a result)."""
    if target.unusable:
        record = partial(AttemptResult, signing.delivery_id(event.id, target.subscription_id))
        return record(target.url, timezone.now(), 0, error_class=UNUSABLE, error=target.unusable)
    if not target.gate.admit(webhook_settings.DISABLE_AFTER_FAILURES):
        return _not_sent(target, event)
    ok = False
    try:
        result = _attempt(client, target, event)
        ok = result.ok
    finally:
        target.gate.done(ok=ok)
    return result


def _not_sent(target: Target, event: Event) -> AttemptResult:
    """The attempt the gate held back: a failure for the counter, retried later like any."""
    failures = target.gate.failures
    return AttemptResult(
        signing.delivery_id(event.id, target.subscription_id),
        target.url,
        timezone.now(),
        duration_ms=0,
        error_class=CIRCUIT_OPEN,
        error=f"{CIRCUIT_OPEN}: not sent, the endpoint failed {failures} times in a row "
        "(the subscription is being disabled)",
    )


def _attempt(client: httpx.Client, target: Target, event: Event) -> AttemptResult:
    now = timezone.now()
    started = time.perf_counter()
    webhook_id = signing.delivery_id(event.id, target.subscription_id)
    record = partial(AttemptResult, webhook_id, target.url, now)
    try:
        url = ssrf.sendable_url(target.url)
    except ValueError as exc:
        return _failed(record, started, INVALID_URL, exc)
    try:
        return _post(client, url, target, event, record=record, now=now, started=started)
    except EXPECTED_ERRORS as exc:
        return _failed(record, started, _error_class(exc), exc)
    except Exception as exc:
        # A bug (ours or a library's): transient, so it is retried and dead-letters eventually.
        logger.exception("webhook attempt failed unexpectedly: %s", type(exc).__name__)
        return _failed(record, started, type(exc).__name__, exc)


def _post(
    client: httpx.Client,
    url: httpx.URL,
    target: Target,
    event: Event,
    *,
    record: Callable[..., AttemptResult],
    now: dt.datetime,
    started: float,
) -> AttemptResult:
    body = body_for(event)
    headers = headers_for(target, event, body, timestamp=int(now.timestamp()))
    with client.stream("POST", url, content=body, headers=headers) as response:
        excerpt = _read_excerpt(response, started)
    return record(
        duration_ms=_elapsed_ms(started),
        status_code=response.status_code,
        excerpt=excerpt,
        error_class="" if response.is_success else "HTTPStatus",
        error="" if response.is_success else _status_error(response),
        retry_after=retry_after_seconds(response.headers.get("retry-after"), now),
    )


def _failed(
    record: Callable[..., AttemptResult], started: float, error_class: str, exc: BaseException
) -> AttemptResult:
    return record(
        duration_ms=_elapsed_ms(started),
        error_class=error_class,
        error=f"{error_class}: {exc}"[:2000],
    )


def _read_excerpt(response: httpx.Response, started: float) -> str:
    """The first 2 KiB of the body; keep reading (discarding) a little so keep-alive survives."""
    deadline = started + webhook_settings.TIMEOUT
    kept = bytearray()
    seen = 0
    for chunk in response.iter_bytes():
        if len(kept) < EXCERPT_BYTES:
            kept.extend(chunk[: EXCERPT_BYTES - len(kept)])
        seen += len(chunk)
        if seen > DRAIN_BYTES or time.perf_counter() > deadline:
            break  # the connection is closed instead of reused
    return kept.decode("utf-8", errors="replace")


def _status_error(response: httpx.Response) -> str:
    if response.is_redirect:
        location = response.headers.get("location", "?")
        return f"HTTP {response.status_code}: redirect to {location} not followed"
    return f"HTTP {response.status_code} {response.reason_phrase}".strip()


def _error_class(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "Timeout"
    return type(exc).__name__


def _elapsed_ms(started: float) -> int:
    return int((time.perf_counter() - started) * 1000)
