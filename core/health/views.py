"""GET /api/v1/health: a plain Django view (no API key, no throttle) over core.health.registry."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from core.health.registry import run_checks


@csrf_exempt  # any other method is a 405 with `Allow: GET`, not a CSRF 403
@never_cache
@require_GET
def health_view(request: HttpRequest) -> JsonResponse:
    """200 when every required check passed, 503 otherwise; answers within the budget."""
    report = run_checks()
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)
