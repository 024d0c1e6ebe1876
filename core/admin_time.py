"""Times as the console shows them: one exact format everywhere, and a human "1 min ago" / "in
3 h" with the exact time on hover.

The exact format is the admin's DATETIME_FORMAT (deskcomm/formats: `Y-m-d H:i:s`) followed by the
time zone's name: "2026-11-02 12:00:00 UTC". Relative times are rounded to one unit, the way a
person says them: 64 seconds ago is "1 min ago", not "64 s ago".
"""

from __future__ import annotations

import datetime as dt

from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.safestring import SafeString

EXACT_TIME = "Y-m-d H:i:s"  # deskcomm/formats DATETIME_FORMAT: one format on every page
UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def exact_time(value: dt.datetime | None, zone: dt.tzinfo | None = None) -> str:
    """'2026-11-02 12:00:00 UTC' (the admin's own format) in `zone` (default: the current time
    zone), '-' when there is none."""
    if value is None:
        return "-"
    local = timezone.localtime(value, zone)
    name = str(zone) if zone is not None else timezone.get_current_timezone_name()
    return f"{date_format(local, EXACT_TIME)} {name}"


def span(seconds: float) -> str:
    """'45 s', '1 min', '3 h', '2 d': a duration rounded down to its largest unit."""
    whole = max(int(seconds), 0)
    for size, unit in UNITS:
        if whole >= size:
            return f"{whole // size} {unit}"
    return "0 s"


def relative(value: dt.datetime, now: dt.datetime | None = None) -> str:
    """'1 min ago', 'in 3 h', 'just now' (within a second either way)."""
    seconds = (value - (now or timezone.now())).total_seconds()
    if abs(seconds) < 1:
        return "just now"
    return f"in {span(seconds)}" if seconds > 0 else f"{span(-seconds)} ago"


def when(
    value: dt.datetime | None, now: dt.datetime | None = None, *, zone: dt.tzinfo | None = None
) -> SafeString | str:
    """A <time> reading '1 min ago' (or 'in 3 h'), the exact time in its title and `datetime`."""
    if value is None:
        return "-"
    return format_html(
        '<time class="dc-when" datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        exact_time(value, zone),
        relative(value, now),
    )
