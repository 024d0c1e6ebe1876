"""Admin pages that are not a model list: the bus status page and the correlation view."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, JsonResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import never_cache

from core import admin_scope, admin_time
from core.replica.routing import replica_view
from eventbus.admin import rendering, selectors, status_charts
from eventbus.admin.status_charts import ChartFilterForm
from eventbus.operations.status import RANGES, BusStatus, ChartRange, Row, bus_status, chart_series
from eventbus.store import consumer_labels
from eventbus.store.consumer_labels import ConsumerLabel
from eventbus.store.registry import registry

REFRESH_SECONDS = 30  # the tables' reload toggle's period (static/eventbus/status.js)
LIVE_SECONDS = 5  # the charts' live update period (static/eventbus/status.js)
# The organization of a staff user bound to none: no tenant has it, so the charts are empty (and
# their cached steps, keyed by it, are every viewer's zeros).
NOBODY = uuid.UUID(int=0)


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
    chart_range, scope = _chart_scope(request, form)
    buckets = chart_series(chart_range, now=status.now, **scope)
    return {
        "chart_filters": form,
        "charts_scoped": bool(form.is_valid() and form.scope()),
        "chart_range": chart_range,
        "chart_ranges": [(r, _with_range(request, r.key)) for r in RANGES.values()],
        "line_charts": status_charts.charts(buckets, chart_range),
        "live_url": reverse("eventbus_ops:status-charts"),
        "live_seconds": LIVE_SECONDS,
        "refresh_seconds": REFRESH_SECONDS,
    }


def _chart_scope(request: HttpRequest, form: ChartFilterForm) -> tuple[ChartRange, dict[str, Any]]:
    """The range and the filters of the charts. An organization-scoped staff user always sees
    the organization they work in (the tenant wall would hide the rest anyway; the filter must
    not key the cached steps with another tenant's id), or nothing when bound to none."""
    scope = form.scope() if form.is_valid() else {}
    if admin_scope.organizations_of(request) is not None:
        scope["organization_id"] = admin_scope.active_organization(request) or NOBODY
    return form.chart_range(), scope


def _with_range(request: HttpRequest, key: str) -> str:
    """This page's query string with another range (the other filters kept)."""
    query = request.GET.copy()
    query["range"] = key
    return "?" + urlencode(sorted(query.items()))


@never_cache
@replica_view
def status_charts_view(request: HttpRequest) -> JsonResponse:
    """The charts of the status page as JSON, for its live update: GET with the page's filters
    (`range`, `consumer`, `organization`); 400 with the form's errors for a bad one."""
    _require(request, "eventbus.view_delivery")
    form = ChartFilterForm(request.GET, consumers=None)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    chart_range, scope = _chart_scope(request, form)
    now = timezone.now()
    buckets = chart_series(chart_range, now=now, **scope)
    return JsonResponse(
        {
            "range": chart_range.key,
            "as_of": now.isoformat(),
            "as_of_text": admin_time.exact_time(now),
            "charts": status_charts.charts_json(buckets, chart_range),
        }
    )


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
