"""Console pages for running the bus: the worker processes, and the consumers with their pause
and circuit-breaker states (pause / resume, audited, through eventbus.services)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from core import workers
from eventbus import selectors, services

PAUSE_PERMISSION = "eventbus.pause_consumer"


def workers_view(request: HttpRequest) -> TemplateResponse:
    """Every registered process: alive, stale (missed heartbeats) or stopped."""
    _require(request, "core.view_workerprocess")
    rows = workers.workers()
    context = {
        **admin.site.each_context(request),
        "title": "Workers",
        "rows": rows,
        "alive": sum(1 for r in rows if r.state == "alive"),
        "stale": sum(1 for r in rows if r.state == "stale"),
        "heartbeat": workers.worker_settings.HEARTBEAT_SECONDS,
        "stale_after": workers.worker_settings.STALE_AFTER_BEATS,
    }
    return TemplateResponse(request, "admin/eventbus/workers.html", context)


def consumers_view(request: HttpRequest) -> TemplateResponse:
    """Each consumer's state (running, paused, breaker open / half-open), since when, why."""
    _require(request, "eventbus.view_consumerstate")
    context = {
        **admin.site.each_context(request),
        "title": "Consumers",
        "lines": selectors.consumer_lines(),
        "can_pause": request.user.has_perm(PAUSE_PERMISSION),
    }
    return TemplateResponse(request, "admin/eventbus/consumers.html", context)


@require_POST
def consumer_action_view(request: HttpRequest, consumer: str, action: str) -> HttpResponse:
    """POST pause / resume (with a reason) from the consumers page."""
    _require(request, PAUSE_PERMISSION)
    reason = request.POST.get("reason", "").strip()
    actor = f"admin:{request.user.get_username()}"
    try:
        changed = _act(action, consumer=consumer, actor=actor, reason=reason)
    except (ValueError, services.UnknownConsumerError) as exc:
        messages.error(request, str(exc))
    else:
        if changed:
            messages.success(request, f"{action.capitalize()}d {consumer}")
        else:
            messages.warning(request, f"{consumer}: nothing to {action} (already {action}d)")
    return HttpResponseRedirect(reverse("eventbus_ops:consumers"))


def _act(action: str, *, consumer: str, actor: str, reason: str) -> bool:
    if action == "pause":
        return services.consumer_pause(consumer=consumer, actor=actor, reason=reason)
    return services.consumer_resume(consumer=consumer, actor=actor, reason=reason)


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied
