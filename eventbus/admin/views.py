"""Admin pages that are not a model list: the bus status page and the correlation view."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse

from eventbus.admin import rendering, selectors
from eventbus.status import BusStatus, Row, bus_status


@dataclass(frozen=True)
class StatusLine:
    """One table row of the status page, ready to draw."""

    row: Row
    lag: str
    spark: rendering.Sparkline
    fail_rate: str = "-"
    latency: str = "-"  # emit -> done, "p50 / p95"


def status_view(request: HttpRequest) -> TemplateResponse:
    """Backlog, lag, DLQ and throughput per event type/consumer and per organization."""
    _require(request, "eventbus.view_delivery")
    status = bus_status()
    context = {
        **admin.site.each_context(request),
        "title": "Bus status",
        "status": status,
        "lines": [_line(row, status) for row in status.by_type],
        "organizations": [_line(row, status) for row in status.by_organization],
        "totals_lag": rendering.age(status.totals.oldest_due_at, status.now),
        "totals_fail_rate": rendering.percent(status.totals.fail_rate),
        "totals_spark": rendering.sparkline(status.totals.throughput, height=40, column_width=18),
        "dlq_by_type": rendering.bar_chart(_dead_by_type(status)),
        "dlq_by_org": rendering.bar_chart(
            [(r.key[1], r.counts.dead) for r in status.by_organization]
        ),
        "pending_by_consumer": rendering.bar_chart(_pending_by_consumer(status)),
    }
    return TemplateResponse(request, "admin/eventbus/status.html", context)


def _line(row: Row, status: BusStatus) -> StatusLine:
    counts = row.counts
    latency = "-"
    if counts.latency_p50 is not None:
        latency = (
            f"{rendering.duration(counts.latency_p50)} / {rendering.duration(counts.latency_p95)}"
        )
    return StatusLine(
        row,
        rendering.age(counts.oldest_due_at, status.now),
        rendering.sparkline(counts.throughput),
        rendering.percent(counts.fail_rate),
        latency,
    )


def _dead_by_type(status: BusStatus) -> list[tuple[str, int]]:
    totals: dict[str, int] = defaultdict(int)
    for row in status.by_type:
        totals[row.key[0]] += row.counts.dead
    return list(totals.items())


def _pending_by_consumer(status: BusStatus) -> list[tuple[str, int]]:
    totals: dict[str, int] = defaultdict(int)
    for row in status.by_type:
        totals[row.key[1]] += row.counts.pending
    return list(totals.items())


class CorrelationForm(forms.Form):
    request_id = forms.CharField(
        label="Request id",
        max_length=100,
        widget=forms.TextInput(attrs={"size": 40, "autofocus": True}),
    )


def correlation_view(request: HttpRequest) -> TemplateResponse:
    """Everything one request id caused, oldest first: audit, events, deliveries, attempts."""
    _require(request, "eventbus.view_eventlog")
    form = CorrelationForm(request.GET if "request_id" in request.GET else None)
    result = None
    audit_hidden = not request.user.has_perm("core.view_auditlog")
    if form.is_valid():
        result = selectors.correlation(form.cleaned_data["request_id"])
        if audit_hidden:
            result = selectors.without_audit(result)
    context = {
        **admin.site.each_context(request),
        "title": "Correlation: what did one request cause?",
        "form": form,
        "result": result,
        "audit_hidden": audit_hidden,
    }
    return TemplateResponse(request, "admin/eventbus/correlation.html", context)


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied
