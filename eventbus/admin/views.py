"""Admin pages that are not a model list: the bus status page and the correlation view."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse

from core.replica.routing import replica_view
from eventbus import consumer_labels
from eventbus.admin import rendering, selectors, status_charts
from eventbus.admin.status_charts import ChartFilterForm
from eventbus.consumer_labels import ConsumerLabel
from eventbus.registry import registry
from eventbus.status import BusStatus, Row, bus_status, charts

REFRESH_SECONDS = 30  # the auto-refresh toggle's period (static/eventbus/status.js)


@dataclass(frozen=True)
class StatusLine:
    """One table row of the status page, ready to draw."""

    row: Row
    lag: str
    spark: rendering.Sparkline
    fail_rate: str = "-"
    latency: str = "-"  # emit -> done, "p50 / p95"
    consumer: ConsumerLabel | None = None  # the row's consumer by name (by-type rows)


@replica_view
def status_view(request: HttpRequest) -> TemplateResponse:
    """Backlog, lag, DLQ and throughput per event type/consumer and per organization, and the
    rollup's charts. Each section of the page has its own context function and template
    (`status_<section>.html`, one block each in status.html)."""
    _require(request, "eventbus.view_delivery")
    status = bus_status()
    context = {
        **admin.site.each_context(request),
        "title": "Bus status",
        "status": status,
        **_summary_section(status),
        **_charts_section(request, status),
        **_dead_letter_section(status),
        **_table_sections(status),
    }
    return TemplateResponse(request, "admin/eventbus/status.html", context)


def _summary_section(status: BusStatus) -> dict[str, Any]:
    return {
        "totals_lag": rendering.age(status.totals.oldest_due_at, status.now),
        "totals_fail_rate": rendering.percent(status.totals.fail_rate),
    }


def _charts_section(request: HttpRequest, status: BusStatus) -> dict[str, Any]:
    form = ChartFilterForm(request.GET or None, consumers=_chart_consumers(status))
    scope = form.scope() if form.is_valid() else {}
    data = charts(now=status.now, **scope)
    return {
        "chart_filters": form,
        "charts_scoped": bool(scope),
        "outcome_charts": [
            status_charts.outcomes(data.hour, name="hour", title="Last hour, per minute"),
            status_charts.outcomes(data.day, name="day", title="Last 24 hours, per 15 minutes"),
        ],
        "lag_charts": [
            status_charts.lag(data.hour, name="lag-hour", title="Lag, last hour (per minute)"),
            status_charts.lag(data.day, name="lag-day", title="Lag, last 24 hours (per 15 min)"),
        ],
        "refresh_seconds": REFRESH_SECONDS,
    }


def _dead_letter_section(status: BusStatus) -> dict[str, Any]:
    return {
        "dlq_by_type": rendering.bar_chart(_dead_by_type(status)),
        "dlq_by_org": rendering.bar_chart(
            [(r.key[1], r.counts.dead) for r in status.by_organization]
        ),
        "pending_by_consumer": rendering.bar_chart(_pending_by_consumer(status)),
    }


def _table_sections(status: BusStatus) -> dict[str, Any]:
    labels = _consumer_labels(status)
    return {
        "lines": [_line(row, status, labels[row.key[1]]) for row in status.by_type],
        "organizations": [_line(row, status) for row in status.by_organization],
    }


def _consumer_labels(status: BusStatus) -> dict[str, ConsumerLabel]:
    """The by-type rows' consumers by name (one lookup: a webhook's is its subscription's)."""
    return consumer_labels.labels({row.key[1] for row in status.by_type})


def _chart_consumers(status: BusStatus) -> list[str]:
    return sorted({c.name for c in registry.all()} | {row.key[1] for row in status.by_type})


def _line(row: Row, status: BusStatus, consumer: ConsumerLabel | None = None) -> StatusLine:
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
        consumer,
    )


def _dead_by_type(status: BusStatus) -> list[tuple[str, int]]:
    totals: dict[str, int] = defaultdict(int)
    for row in status.by_type:
        totals[row.key[0]] += row.counts.dead
    return list(totals.items())


def _pending_by_consumer(status: BusStatus) -> list[tuple[str, int]]:
    labels = _consumer_labels(status)
    totals: dict[str, int] = defaultdict(int)
    for row in status.by_type:
        totals[row.key[1]] += row.counts.pending
    return [(labels[name].title, pending) for name, pending in totals.items()]


class CorrelationForm(forms.Form):
    request_id = forms.CharField(
        label="Request id",
        max_length=100,
        widget=forms.TextInput(attrs={"size": 40, "autofocus": True}),
    )


@replica_view
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
        rendering.labelled(e.item for e in result.entries if e.kind == "delivery")
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
