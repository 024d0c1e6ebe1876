"""Small presentation helpers for the console: escaped JSON, short errors, links, SVG geometry.

Everything that comes from data is escaped: `format_html` for fragments, Django templates (with
autoescape) for the rest; the charts are computed here and drawn by templates as inline SVG.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlencode

from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_time import exact_time
from eventbus.store import consumer_labels, tracebacks
from eventbus.store.consumer_labels import ConsumerLabel
from eventbus.store.models import SHORT_ID_CHARS

SHORT_ERROR = 120
T = TypeVar("T")


def pretty_json(value: Any) -> SafeString:
    """Indented JSON in a <pre>, escaped (a `<script>` in a payload shows as text)."""
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return format_html('<pre class="dc-json">{}</pre>', text)


def pretty_text(value: str | None) -> SafeString:
    """Multi-line text (errors, tracebacks) in a <pre>, escaped."""
    return format_html('<pre class="dc-error">{}</pre>', value or "")


def short(value: str | None, limit: int = SHORT_ERROR) -> str:
    """First line of `value`, at most `limit` characters (escaped later by the admin)."""
    line = (value or "").strip().splitlines()[0] if (value or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def moment(value: dt.datetime | None, now: dt.datetime | None = None) -> SafeString | str:
    """'3 h ago', with the exact time on hover (and in `datetime` for scripts and tests)."""
    if value is None:
        return "-"
    ago = age(value, now or timezone.now())
    return format_html(
        '<time class="dc-when" datetime="{}" title="{}">{} ago</time>',
        value.isoformat(),
        exact_time(value),
        ago,
    )


def due(value: dt.datetime | None, now: dt.datetime | None = None) -> SafeString | str:
    """'in 4 min' (or 'due now'), with the exact time on hover: when a pending delivery runs."""
    if value is None:
        return "-"
    now = now or timezone.now()
    text = f"in {age(now, value)}" if value > now else "due now"
    return format_html(
        '<time class="dc-when" datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        exact_time(value),
        text,
    )


def short_id(value: object, url: str = "") -> SafeString:
    """An id by its last characters, "…1a2b3c4d" (linked when `url` is given), and a button
    copying it all. The last ones: event ids are UUIDv7, whose first characters are the time
    (alike on every row of a page) and the rest random. The search box accepts what is shown."""
    full = str(value)
    shown = f"…{full[-SHORT_ID_CHARS:]}" if len(full) > SHORT_ID_CHARS + 2 else full
    label = format_html('<a href="{}">{}</a>', url, shown) if url else shown
    return format_html(
        '<span class="dc-id" title="{}"><code>{}</code>'
        '<button type="button" class="dc-copy" data-copy="{}" aria-label="Copy {}">copy</button>'
        "</span>",
        full,
        label,
        full,
        full,
    )


def labelled(rows: Iterable[T]) -> list[T]:
    """The rows (deliveries, status lines: anything with a `consumer` name), each carrying its
    consumer's label as `consumer_label`; one lookup for them all (a query per source at most)."""
    listed = list(rows)
    found = consumer_labels.labels({row.consumer for row in listed})  # type: ignore[attr-defined]
    for row in listed:
        row.consumer_label = found[row.consumer]  # type: ignore[attr-defined]
    return listed


def consumer_of(row: Any) -> SafeString | str:
    """A row's consumer by name: its label when `labelled` gave it one, else looked up."""
    label = (
        getattr(row, "consumer_label", None) or consumer_labels.labels([row.consumer])[row.consumer]
    )
    return consumer(label)


def consumer(label: ConsumerLabel) -> SafeString | str:
    """A consumer by name: title (linked to its record) over a muted detail line."""
    if label.is_plain:
        return label.name
    title = format_html('<a href="{}">{}</a>', label.url, label.title) if label.url else label.title
    off = (
        format_html(' <span class="dc-badge dc-dead">{}</span>', "disabled")
        if label.disabled
        else ""
    )
    return format_html(
        '<span class="dc-consumer" title="{}">{}{}<small class="dc-muted">{}</small></span>',
        label.name,
        title,
        off,
        label.detail,
    )


def errors(final: str | None, root: str | None) -> SafeString:
    """The final error and, under it when it differs, the root cause from the attempt history."""
    final_html = format_html(
        '<span class="dc-final" title="{}">{}</span>', final or "", short(final)
    )
    if not root or short(root) == short(final):
        return final_html
    return format_html(
        '{}<span class="dc-root" title="{}"><b>root cause:</b> {}</span>',
        final_html,
        root,
        short(root),
    )


def admin_link(viewname: str, pk: object, label: object) -> SafeString:
    return format_html('<a href="{}">{}</a>', reverse(viewname, args=[pk]), label)


class OrganizationColumn:
    """The `organization_name` column/field: the tenant's name, linking to it."""

    @admin.display(description="organization")
    def organization_name(self, obj: Any) -> SafeString:
        return admin_link("admin:core_organization_change", obj.organization_id, obj.organization)


class EventColumns:
    """Columns/fields of the row's event: entity, request id (linked), payload, metadata."""

    def event_of(self, obj: Any) -> Any:
        return obj  # the row is the event; admins of deliveries return obj.event

    @admin.display(description="entity")
    def entity(self, obj: Any) -> str:
        event = self.event_of(obj)
        return f"{event.entity_kind} {event.entity_id or ''}".strip()

    @admin.display(description="request id")
    def request_id(self, obj: Any) -> SafeString | str:
        return correlation_link(self.event_of(obj).metadata.get("request_id"))

    @admin.display(description="payload")
    def payload_pretty(self, obj: Any) -> SafeString:
        return pretty_json(self.event_of(obj).payload)

    @admin.display(description="metadata")
    def metadata_pretty(self, obj: Any) -> SafeString:
        return pretty_json(self.event_of(obj).metadata)


def correlation_link(request_id: str | None) -> SafeString | str:
    if not request_id:
        return "-"
    url = reverse("eventbus_ops:correlation") + "?" + urlencode({"request_id": request_id})
    return format_html('<a href="{}">{}</a>', url, request_id)


def age(since: dt.datetime | None, now: dt.datetime) -> str:
    """'3 h 12 min', '45 s': how long ago, compact (for lag columns)."""
    if since is None:
        return "-"
    return _compact(max(int((now - since).total_seconds()), 0))


def _compact(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"


def duration(value: dt.timedelta | None) -> str:
    """'1.2 s', '350 ms', '4 min 10 s': a compact duration ('-' when there is none)."""
    if value is None:
        return "-"
    seconds = value.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return _compact(int(seconds))


def duration_seconds(seconds: float) -> str:
    """'0 s', '45 s', '3 min 5 s', '2 min': a lag in whole seconds (chart axes and titles)."""
    text = _compact(max(int(seconds), 0))
    return text.removesuffix(" 0 s") if text != "0 s" else text


def percent(value: float | None) -> str:
    """'2.5%', '0%', '-' (no attempts ended)."""
    if value is None:
        return "-"
    return f"{value * 100:.1f}%".replace(".0%", "%")


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    y: int
    width: int


@dataclass(frozen=True)
class BarChart:
    """Horizontal bars, one row each: the template draws label, bar and value."""

    bars: list[Bar]
    width: int
    height: int
    label_width: int
    bar_area: int
    row_height: int


def bar_chart(
    rows: list[tuple[str, int]], *, width: int = 420, label_width: int = 190, row_height: int = 20
) -> BarChart:
    """Geometry for a bar chart of (label, value), biggest first; empty rows dropped."""
    rows = sorted((r for r in rows if r[1] > 0), key=lambda r: -r[1])[:15]
    bar_area = width - label_width - 60
    top = max((v for _, v in rows), default=1)
    bars = [
        Bar(label, value, i * row_height, max(1, round(bar_area * value / top)))
        for i, (label, value) in enumerate(rows)
    ]
    return BarChart(bars, width, max(len(bars), 1) * row_height, label_width, bar_area, row_height)


@dataclass(frozen=True)
class Sparkline:
    """Column sparkline of per-bucket counts (oldest left)."""

    columns: list[tuple[int, int, int, int]]  # x, y, height, value
    width: int
    height: int
    column_width: int
    peak: int


def sparkline(values: list[int], *, height: int = 22, column_width: int = 7) -> Sparkline:
    peak = max(values, default=0)
    columns = []
    for i, value in enumerate(values):
        h = round((height - 2) * value / peak) if peak else 0
        h = max(h, 1) if value else 0
        columns.append((i * (column_width + 1), height - h, h, value))
    width = len(values) * (column_width + 1)
    return Sparkline(columns, width, height, column_width, peak)


def traceback(text: str | None) -> SafeString | str:
    """A recorded traceback, collapsed: the innermost frame's `file:line` (and function) in the
    summary, the whole text in a monospace block when opened; '-' when there is none."""
    if not text:
        return "-"
    frame = tracebacks.last_frame(text)
    where = (
        format_html(
            '<code class="dc-frame" title="{}">{}</code> in <code>{}</code>',
            frame.file,
            frame.where,
            frame.function,
        )
        if frame
        else "no frame"
    )
    return format_html(
        '<details class="dc-trace"><summary>Traceback at {}</summary>'
        '<pre class="dc-error">{}</pre></details>',
        where,
        text,
    )


def redelivered_flag(obj: Any) -> SafeString | str:
    """A badge when an earlier run may have happened unrecorded; nothing otherwise (a list
    column: the usual "no" is not worth a mark on every row)."""
    if not getattr(obj, "redelivered", False):
        return ""
    return format_html(
        '<span class="dc-badge dc-redelivered" title="{}">redelivered</span>', redelivery(obj)
    )


def redelivery(obj: Any) -> str:
    """Whether a delivery's handler may have run before without its outcome being recorded."""
    if not getattr(obj, "redelivered", False):
        return "no"
    return f"yes: {obj.redelivery_reason or 'its worker died or lost its lease while holding it'}"
