"""The status page's charts section: its filter form (range, consumer, organization) and the
rollup's buckets as line charts, drawn by the page and redrawn live from `charts_json`."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from django import forms

from core.admin_scope import visible_organizations
from core.models import Organization
from eventbus.admin import rendering
from eventbus.admin.charts import LineChart, Series, as_json, line_chart
from eventbus.history.rollup import Bucket
from eventbus.operations.status import DEFAULT_RANGE, RANGES, ChartRange

ORGANIZATION_CHOICES = 500  # the filter lists this many organizations, by name


class ChartFilterForm(forms.Form):
    """Scope the charts to a range, one consumer and/or one organization (GET; blank: the last
    hour, all of them)."""

    range = forms.ChoiceField(required=False, choices=[(key, r.label) for key, r in RANGES.items()])
    consumer = forms.ChoiceField(required=False)
    organization = forms.ChoiceField(required=False)

    def __init__(self, data: Any = None, *, consumers: Sequence[str] | None) -> None:
        """`consumers`: the choices offered (None: any name, for the live update, which does
        not compute the page's list each time)."""
        super().__init__(data)
        if consumers is None:
            self.fields["consumer"] = forms.CharField(required=False, max_length=200)
        else:
            self._field("consumer").choices = [
                ("", "all consumers"),
                *((c, c) for c in consumers),
            ]
        organizations = visible_organizations(Organization.objects.order_by("name"))
        organizations = organizations.values_list("pk", "name")
        self._field("organization").choices = [
            ("", "all organizations"),
            *((str(pk), name) for pk, name in organizations[:ORGANIZATION_CHOICES]),
        ]

    def _field(self, name: str) -> forms.ChoiceField:
        return cast(forms.ChoiceField, self.fields[name])

    def chart_range(self) -> ChartRange:
        """The range asked for (the last hour when none, or when the form is invalid)."""
        key = self.cleaned_data.get("range") if self.is_valid() else None
        return RANGES[key or DEFAULT_RANGE]

    def scope(self) -> dict[str, Any]:
        """Keyword arguments of `eventbus.operations.status.chart_series` (only the filters
        that are set)."""
        scope: dict[str, Any] = {}
        if consumer := self.cleaned_data.get("consumer"):
            scope["consumer"] = consumer
        if organization := self.cleaned_data.get("organization"):
            scope["organization_id"] = uuid.UUID(organization)
        return scope


def charts(buckets: Sequence[Bucket], chart_range: ChartRange) -> list[LineChart]:
    """The outcomes chart and the lag chart of one range."""
    return [
        outcomes(
            buckets,
            name="outcomes",
            title=f"{chart_range.span.capitalize()}, {chart_range.per}",
            chart_range=chart_range,
        ),
        lag(
            buckets,
            name="lag",
            title=f"Lag, {chart_range.span} ({chart_range.per})",
            chart_range=chart_range,
        ),
    ]


def charts_json(buckets: Sequence[Bucket], chart_range: ChartRange) -> list[dict[str, Any]]:
    """`charts` as JSON, for the live update."""
    return [as_json(chart) for chart in charts(buckets, chart_range)]


def outcomes(
    buckets: Sequence[Bucket], *, name: str, title: str, chart_range: ChartRange
) -> LineChart:
    """Done, failed (to be retried) and dead attempts per bucket."""
    return line_chart(
        name,
        title,
        [b.start for b in buckets],
        [
            Series("done", "done", [b.done for b in buckets]),
            Series("failed", "failed", [b.failed for b in buckets]),
            Series("dead", "dead", [b.dead for b in buckets]),
        ],
        tick_every=_tick_every(buckets, chart_range),
        time_format=chart_range.time_format,
    )


def lag(buckets: Sequence[Bucket], *, name: str, title: str, chart_range: ChartRange) -> LineChart:
    """The worst sampled lag per bucket (0 where nothing was waiting or sampled)."""
    return line_chart(
        name,
        title,
        [b.start for b in buckets],
        [Series("lag", "lag (oldest due)", [b.lag_seconds or 0.0 for b in buckets])],
        tick_every=_tick_every(buckets, chart_range),
        value_label=_seconds,
        seconds=True,
        time_format=chart_range.time_format,
    )


def _tick_every(buckets: Sequence[Bucket], chart_range: ChartRange) -> int:
    return max(len(buckets) // chart_range.ticks, 1)


def _seconds(value: float) -> str:
    return rendering.duration_seconds(value)
