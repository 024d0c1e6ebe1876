"""The numbers the admin index opens on, as Oban Web and Sidekiq open on theirs:
`{% load ops_index %}{% ops_counts as counts %}` in templates/admin/index.html.

One statement (`sql/index_counts.sql`, each count capped so its cost does not grow with the
tables), scoped like every admin read: every organization for a superuser or a platform
operator, the organization they work in for organization-scoped staff. Each number is shown
only to a user who may open the page it links to.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django import template
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone

from core.admin_scope import active_organization, organizations_of
from core.models import SYSTEM_ORGANIZATION_ID
from core.replica.routing import read_connection
from core.workers import worker_settings
from eventbus.store.sql import statement

register = template.Library()

CAP = 100_000  # a count stops here: "100,000+"
HOUR = dt.timedelta(hours=1)


@dataclass(frozen=True)
class Count:
    """One number of the index: what it counts, the page behind it, whether it is bad news."""

    label: str
    value: int
    url: str
    alert: bool = False

    @property
    def shown(self) -> str:
        return f"{CAP:,}+" if self.value >= CAP else f"{self.value:,}"


# (label, column of the row, permission to see it, page, bad news when non-zero)
COUNTS = (
    ("ready to run", 0, "eventbus.view_delivery", "admin:eventbus_delivery_changelist", False),
    ("waiting to retry", 1, "eventbus.view_delivery", "eventbus_ops:status", False),
    ("dead letters", 2, "eventbus.view_deadletter", "admin:eventbus_deadletter_changelist", True),
    ("events, last hour", 3, "eventbus.view_eventlog", "admin:eventbus_eventlog_changelist", False),
    ("workers alive", 4, "core.view_workerprocess", "eventbus_ops:workers", False),
)
READY_FILTER = "?status=pending"


@register.simple_tag(takes_context=True)
def ops_counts(context: template.Context) -> list[Count]:
    """The counts this user may see (none: no query)."""
    request: HttpRequest = context["request"]
    visible = [entry for entry in COUNTS if request.user.has_perm(entry[2])]
    if not visible:
        return []
    row = index_counts(request)
    counts = []
    for label, column, _, page, bad in visible:
        url = reverse(page) + (READY_FILTER if column == 0 else "")
        counts.append(Count(label, row[column], url, alert=bad and row[column] > 0))
    return counts


def index_counts(request: HttpRequest, now: dt.datetime | None = None) -> tuple[int, ...]:
    """(ready, retrying, dead, events in the last hour, workers alive) in the request's scope."""
    now = now or timezone.now()
    stale_after = worker_settings.HEARTBEAT_SECONDS * worker_settings.STALE_AFTER_BEATS
    params: dict[str, Any] = {
        "now": now,
        "hour_ago": now - HOUR,
        "alive_since": now - dt.timedelta(seconds=stale_after),
        "cap": CAP,
        "system": SYSTEM_ORGANIZATION_ID,
        "everywhere": organizations_of(request) is None,
        "organization": active_organization(request),
    }
    with read_connection().cursor() as cursor:
        cursor.execute(statement("index_counts"), params)
        return tuple(cursor.fetchone())
