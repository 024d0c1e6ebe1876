"""`POST /api/webhooks/waha/<session>`: WAHA's webhooks, verified by their HMAC.

WAHA signs each webhook with the session's HMAC key: `X-Webhook-Hmac` is the hex HMAC-SHA512 of
the raw body, `X-Webhook-Hmac-Algorithm` names the algorithm (`sha512`). A missing or wrong
signature (or a session with no secret) is a 401 and nothing is written. Unknown session: 404.
The view only writes rows and events (whatsapp.inbound); it calls nothing over HTTP.
"""

from __future__ import annotations

import hashlib
import hmac
import json

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import rls
from whatsapp import inbound, metrics
from whatsapp.models import WahaSession

SIGNATURE_HEADER = "X-Webhook-Hmac"
ALGORITHM_HEADER = "X-Webhook-Hmac-Algorithm"


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
    if found is None:
        metrics.INBOUND.labels("unknown_session").inc()
        return JsonResponse({"error": "unknown session"}, status=404)
    if not verified(
        found.webhook_secret, raw, request.headers.get(SIGNATURE_HEADER),
        request.headers.get(ALGORITHM_HEADER),
    ):  # fmt: skip
        metrics.INBOUND.labels("unauthorized").inc()
        return JsonResponse({"error": "invalid or missing signature"}, status=401)
    try:
        body = json.loads(raw)
    except ValueError:
        metrics.INBOUND.labels("bad_request").inc()
        return JsonResponse({"error": "the body is not JSON"}, status=400)
    if not isinstance(body, dict) or body.get("session", session) != session:
        metrics.INBOUND.labels("bad_request").inc()
        return JsonResponse({"error": "not a webhook of this session"}, status=400)
    rls.set_scope(organization_id=found.organization_id)  # writes only in its organization
    result = inbound.handle(found, body)
    metrics.INBOUND.labels(result).inc()
    return JsonResponse({"result": result})
