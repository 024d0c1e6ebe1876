"""Template tags of the admin console (`{% load console %}`): the index's recent actions."""

from __future__ import annotations

import datetime as dt

from django import template
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString

from core import audit
from core.admin_scope import scope_queryset
from core.models import AuditLog

register = template.Library()

RECENT_ACTIONS = 10
# Whose own actions are looked for this far back only (the actor has no index of its own).
OWN_ACTIONS_WINDOW = dt.timedelta(days=30)


@register.simple_tag(takes_context=True)
def recent_audit(context: template.Context) -> list[AuditLog]:
    """The index's "Recent actions": the newest audit log entries this user may read (every
    organization's or the organization's they work in, core.admin_scope), or, without the audit
    log's view permission, their own (pauses, reprocesses, discards and job runs are audited
    there, not in Django's admin log)."""
    request: HttpRequest = context["request"]
    entries = AuditLog.objects.select_related("organization").order_by("-created_at")
    if request.user.has_perm("core.view_auditlog"):
        entries = scope_queryset(request, entries)
    else:
        since = timezone.now() - OWN_ACTIONS_WINDOW
        entries = entries.filter(actor__in=own_actors(request), created_at__gte=since)
    return list(entries[:RECENT_ACTIONS])


def own_actors(request: HttpRequest) -> list[str]:
    """The actor names of this request's user (`admin:<name>` in rows written before
    core.audit's one format)."""
    return [audit.user_actor(request), f"admin:{request.user.get_username()}"]


@register.filter
def audit_target(entry: AuditLog) -> SafeString | str:
    """What an audit entry acted on (a link to a delivery)."""
    from core.admin import audit_target as target

    return target(entry)
