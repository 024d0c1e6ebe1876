"""`POST /api/v1/cron/<job>`: run a scheduled job now (R-C2), for external schedulers and humans.

Fails closed: without INTERNAL_CRON_SECRET configured every call is refused (403), and the secret
must come as `Authorization: Bearer <secret>` or `x-cron-secret: <secret>`, compared in constant
time. The run happens in the request (recorded like a scheduled run); a failed run answers 500.
"""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import rls
from jobs.registry import job_run, jobs


def _presented_secret(request: HttpRequest) -> str:
    authorization = request.headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.headers.get("x-cron-secret", "")


def cron_authorized(request: HttpRequest) -> bool:
    """True only when a secret is configured and the request presents exactly it."""
    expected = str(getattr(settings, "INTERNAL_CRON_SECRET", "") or "")
    presented = _presented_secret(request)
    if not expected or not presented:
        return False
    return hmac.compare_digest(presented.encode(), expected.encode())


@csrf_exempt
@require_POST
def cron_run(request: HttpRequest, name: str) -> JsonResponse:
    if not cron_authorized(request):
        return JsonResponse({"error": "forbidden"}, status=403)
    if name not in jobs.names():
        return JsonResponse({"error": f"unknown job {name!r}", "jobs": jobs.names()}, status=404)
    rls.set_scope(bypass=True)  # a platform job, whatever tenant it touches
    result = job_run(name=name, trigger="http")
    if result.status == "failed":
        body = {**result.as_dict(), "error": "the job failed; see the cron.failed event and logs"}
        return JsonResponse(body, status=500)
    return JsonResponse(result.as_dict(), status=200)
