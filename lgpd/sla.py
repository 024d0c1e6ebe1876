"""When a data request is due, and how long is left: for the admin's due date and SLA columns.

A request is due when its work is scheduled (access: the export at D+7; redaction at D+15;
`lgpd.conf`). Access requests also have a legal deadline (LGPD Art. 19 II: 15 days). The daily
SLA check and the alert rules use the same levels (`deadlines`): warned once a request is past
its own due date, escalated when an access request is LEGAL_MARGIN_DAYS from the legal deadline.
The countdown reads "5 d 3 h left", "overdue by 2 h" or "done", coloured by those warnings.
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

from lgpd.conf import export_delay, legal_deadline, lgpd_settings, redact_delay
from lgpd.models import DataRequest

DUE_FORMAT = "Y-m-d H:i"


def due_at(request: DataRequest) -> dt.datetime:
    """When the request's work is due (received + the export or redaction delay)."""
    delay = export_delay() if request.kind == DataRequest.Kind.ACCESS else redact_delay()
    return request.received_at + delay


def deadlines() -> dict[str, dict[str, dt.timedelta]]:
    """Per kind, each deadline level as the time after `received_at` it falls."""
    legal = legal_deadline()
    return {
        DataRequest.Kind.ACCESS: {
            "due": export_delay(),
            "legal_margin": legal - lgpd_settings.days("LEGAL_MARGIN_DAYS"),
            "legal": legal,
        },
        DataRequest.Kind.REDACT: {"due": redact_delay()},
    }


def exact(value: dt.datetime) -> str:
    return f"{date_format(timezone.localtime(value), DUE_FORMAT)} UTC"


def left(request: DataRequest, now: dt.datetime | None = None) -> tuple[str, str]:
    """(text, state): state is done, ok, warned (SLA warning sent) or overdue."""
    if request.completed_at is not None:
        return "done", "done"
    remaining = due_at(request) - (now or timezone.now())
    if remaining.total_seconds() < 0:
        return f"overdue by {_compact(-remaining)}", "overdue"
    state = "warned" if request.sla_warned_at or request.sla_escalated_at else "ok"
    return f"{_compact(remaining)} left", state


def countdown_html(request: DataRequest, now: dt.datetime | None = None) -> SafeString:
    text, state = left(request, now)
    return format_html('<span class="lgpd-sla lgpd-sla-{}">{}</span>', state, text)


def _compact(span: dt.timedelta) -> str:
    minutes = int(span.total_seconds() // 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    if days:
        return f"{days} d {hours} h"
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"
