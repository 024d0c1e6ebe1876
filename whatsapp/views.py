"""`POST /api/webhooks/waha/<session>`: WAHA's webhooks, verified by their HMAC.

WAHA signs each webhook with the session's HMAC key: `X-Webhook-Hmac` is the hex HMAC-SHA512 of
the raw body, `X-Webhook-Hmac-Algorithm` names the algorithm (`sha512`). A missing or wrong
signature, a session with no secret and an unknown session get one and the same answer (401,
`UNAUTHORIZED`, after the same HMAC work), so the endpoint does not tell which session names
exist. A signed webhook whose `timestamp` (milliseconds) is further from now than
`WAHA_WEBHOOK_WINDOW_SECONDS` is refused (400: a captured webhook cannot be replayed later), and
one whose `id` was already accepted is a `duplicate` (200, nothing written). The view only
writes rows and events (whatsapp.inbound); it calls nothing over HTTP.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import rls
from whatsapp import inbound, metrics
from whatsapp.conf import whatsapp_settings
from whatsapp.models import WahaSession, WebhookReceipt

SIGNATURE_HEADER = "X-Webhook-Hmac"
ALGORITHM_HEADER = "X-Webhook-Hmac-Algorithm"
UNAUTHORIZED = {"error": "unknown session, or invalid or missing signature"}


def signature(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha512).hexdigest()


def verified(secret: str, body: bytes, given: str | None, algorithm: str | None) -> bool:
    if not secret or not given:
        return False
    if algorithm and algorithm.strip().lower() != "sha512":
        return False
    return hmac.compare_digest(signature(secret, body), given.strip().lower())


@csrf_exempt
@require_POST
def waha_webhook(request: HttpRequest, session: str) -> JsonResponse:
    raw = request.body
    rls.set_scope(bypass=True)  # find the session's organization by the session name
    found = WahaSession.objects.filter(name=session).first()
    # An unknown session costs the same HMAC and gets the same answer as a bad signature.
    secret = found.webhook_secret if found is not None else secrets.token_hex(32)
    signed = verified(
        secret, raw, request.headers.get(SIGNATURE_HEADER), request.headers.get(ALGORITHM_HEADER)
    )
    if found is None or not signed:
        metrics.INBOUND.labels("unknown_session" if found is None else "unauthorized").inc()
        return JsonResponse(UNAUTHORIZED, status=401)
    try:
        body = json.loads(raw)
    except ValueError:
        metrics.INBOUND.labels("bad_request").inc()
        return JsonResponse({"error": "the body is not JSON"}, status=400)
    if not isinstance(body, dict) or body.get("session", session) != session:
        metrics.INBOUND.labels("bad_request").inc()
        return JsonResponse({"error": "not a webhook of this session"}, status=400)
    now = timezone.now()
    problem = _outside_window(body.get("timestamp"), now)
    if problem:
        metrics.INBOUND.labels("stale").inc()
        return JsonResponse({"error": problem}, status=400)
    rls.set_scope(organization_id=found.organization_id)  # writes only in its organization
    event_id = body.get("id")
    try:
        with transaction.atomic():
            if isinstance(event_id, str) and event_id:
                _remember(found, event_id[:200], now)
            result = inbound.handle(found, body)
    except IntegrityError:  # this event id was accepted before (or is being, concurrently)
        result = "duplicate"
    metrics.INBOUND.labels(result).inc()
    return JsonResponse({"result": result})


def _outside_window(timestamp: Any, now: dt.datetime) -> str | None:
    """Why a webhook's `timestamp` (epoch milliseconds) is refused, or None."""
    window = whatsapp_settings.WEBHOOK_WINDOW_SECONDS
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return "the webhook has no timestamp (epoch milliseconds)"
    skew = abs(now.timestamp() - timestamp / 1000)
    if skew > window:
        return f"the webhook's timestamp is {skew:.0f} s from now (accepted: {window:.0f} s)"
    return None


def _remember(session: WahaSession, event_id: str, now: dt.datetime) -> None:
    """Record the event id (IntegrityError if it is known); forget those past twice the window."""
    keep = dt.timedelta(seconds=2 * whatsapp_settings.WEBHOOK_WINDOW_SECONDS)
    WebhookReceipt.objects.filter(session=session, received_at__lt=now - keep).delete()
    with transaction.atomic():
        WebhookReceipt.objects.create(
            organization_id=session.organization_id,
            session=session,
            event_id=event_id,
            received_at=now,
        )
