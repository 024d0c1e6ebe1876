"""The status page's charts section: its filter form and the rollup's buckets as line charts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, cast

from django import forms

from core.admin_scope import visible_organizations
from core.models import Organization
from eventbus.admin import rendering
from eventbus.admin.charts import LineChart, Series, line_chart
from eventbus.rollup import Bucket

ORGANIZATION_CHOICES = 500  # the filter lists this many organizations, by name
TIME_TICKS = 6  # labelled times per chart


class ChartFilterForm(forms.Form):
    """Scope the charts to one consumer and/or one organization (GET; blank: all)."""

    consumer = forms.ChoiceField(required=False)
    organization = forms.ChoiceField(required=False)

    def __init__(self, data: Any = None, *, consumers: Sequence[str]) -> None:
        super().__init__(data)
        self._field("consumer").choices = [("", "all consumers"), *((c, c) for c in consumers)]
        organizations = visible_organizations(Organization.objects.order_by("name"))
        organizations = organizations.values_list("pk", "name")
        self._field("organization").choices = [
            ("", "all organizations"),
            *((str(pk), name) for pk, name in organizations[:ORGANIZATION_CHOICES]),
        ]

    def _field(self, name: str) -> forms.ChoiceField:
        return cast(forms.ChoiceField, self.fields[name])

    def scope(self) -> dict[str, Any]:
        """Keyword arguments of `eventbus.status.charts` (only the filters that are set)."""
        scope: dict[str, Any] = {}
        if consumer := self.cleaned_data.get("consumer"):
            scope["consumer"] = consumer
        if organization := self.cleaned_data.get("organization"):
            scope["organization_id"] = uuid.UUID(organization)
        return scope


def outcomes(buckets: Sequence[Bucket], *, name: str, title: str) -> LineChart:
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
        tick_every=_tick_every(buckets),
    )


def lag(buckets: Sequence[Bucket], *, name: str, title: str) -> LineChart:
    """The worst sampled lag per bucket (0 where nothing was waiting or sampled)."""
    return line_chart(
        name,
        title,
        [b.start for b in buckets],
        [Series("lag", "lag (oldest due)", [b.lag_seconds or 0.0 for b in buckets])],
        tick_every=_tick_every(buckets),
        value_label=_seconds,
        seconds=True,
    )


def _tick_every(buckets: Sequence[Bucket]) -> int:
    return max(len(buckets) // TIME_TICKS, 1)


def _seconds(value: float) -> str:
    return rendering.duration_seconds(value)
