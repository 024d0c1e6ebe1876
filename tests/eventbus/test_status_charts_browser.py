"""The status page's charts in a real browser (headless Chromium, 1280x800), drawn from real
rollup rows and updated in place.

A drain settles deliveries (done, retried, dead) through the real settle statements, which write
this minute's rollup rows; earlier minutes and lag samples are rollup rows written directly. The
test reads the SVG the browser rendered: one series per outcome with a marked point for each
non-zero minute, the time axis labelled every ten minutes, the legend. Then, with a marker set
on `window` (a reload would drop it): new events settled meanwhile appear on the chart by
themselves, the range switch (24 h, 7 d) and the organization filter redraw in place. One
browser session for the module; screenshots go to test-artifacts/admin/.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
import time_machine
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.history import rollup
from eventbus.store.models import Rollup
from eventbus.store.registry import make_consumer, registry
from tests.support.admin import staff
from tests.support.browser import Console
from tests.support.dlq import BROKEN, broken_consumer, drain
from tests.support.waiting import wait_for

PASSWORD = "pw-Charts-1"  # pragma: allowlist secret
FINE = "charts-ok-worker"
MARKER = "window.dcChartsMarker"

pytestmark = pytest.mark.slow


def emit_and_settle(org: Organization, count: int) -> None:
    """`count` test.job events, each done by the fine consumer and dead at the broken one."""
    fine = make_consumer(FINE, lambda event: None, events=["test.job"])
    with broken_consumer(), registry.temporarily(fine):
        for n in range(count):
            eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": n})
        assert drain([BROKEN, FINE]) == 2 * count


def seed(org: Organization, other: Organization) -> dt.datetime:
    """Real settles now (done and dead), and rollup rows 20 and 5 minutes ago; returns the
    minute of the real settles."""
    emit_and_settle(org, 3)
    now = rollup.floor(timezone.now(), rollup.MINUTE)
    past = [(20, org, 7, 2, 0, 12.0), (5, org, 4, 0, 1, 95.0), (5, other, 50, 0, 0, 3.0)]
    for minutes, tenant, done, failed, dead, lag in past:
        Rollup.objects.create(
            bucket_start=now - dt.timedelta(minutes=minutes),
            consumer="flaky-worker",
            organization_id=tenant.pk,
            done=done,
            failed=failed,
            dead=dead,
            lag_seconds=lag,
        )
    return now


def read(ui: Console, css: str, attribute: str) -> list[str]:
    """One attribute (or the text) of every element matching `css`, read in one script: the live
    update replaces the chart's elements every few seconds."""
    return list(
        ui.driver.execute_script(
            "return Array.from(document.querySelectorAll(arguments[0]))"
            ".map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.textContent)",
            css,
            attribute,
        )
    )


def values(ui: Console, chart: str, series: str) -> list[float]:
    return [
        float(v) for v in read(ui, f"#chart-{chart} g[data-series={series}] circle", "data-value")
    ]


def texts(ui: Console, css: str) -> list[str]:
    return read(ui, css, "")


def in_place(ui: Console) -> bool:
    """The page was not reloaded since the marker was set."""
    return bool(ui.driver.execute_script(f"return {MARKER} === 'kept'"))


def settled_now() -> tuple[int, int]:
    live = Rollup.objects.filter(bucket_start__gte=rollup.floor(timezone.now(), rollup.MINUTE))
    return sum(r.done for r in live), sum(r.dead for r in live)


def redrawn(ui: Console, chart: str, what: str) -> None:
    wait_for(
        lambda: read(ui, f"#chart-{chart}", "aria-label") == [what],
        timeout=30,
        what=lambda: f"{chart} titled {what!r}: {ui.page_text()[:400]}",
    )


@pytest.mark.django_db(transaction=True)
def test_status_charts_draw_the_rollup_and_update_in_place(browser: Any, live_server: Any) -> None:
    # Time stands still mid-minute: the settles, the rows "20 and 5 minutes ago" and the page all
    # see the same minute however slowly the machine runs (a minute boundary would shift them).
    with time_machine.travel(timezone.now().replace(second=30, microsecond=0), tick=False):
        org = Organization.objects.create(name="Acme Store", slug="acme")
        other = Organization.objects.create(name="Zed Ltd", slug="zed")
        now = seed(org, other)
        staff("oncall", "eventbus.view_delivery", password=PASSWORD)
        ui = Console(browser, live_server.url)
        ui.open("/admin/login/")
        ui.find("#id_username").send_keys("oncall")
        ui.find("#id_password").send_keys(PASSWORD)
        ui.find("input[type=submit]").click()
        ui.wait_for_text("Log out")
        browser.set_window_size(1280, 800)
        ui.open("/admin/ops/status/")
        ui.wait_for_text("Last hour, per minute")

        done_now, dead_now = settled_now()
        assert done_now and dead_now  # the drain's own settles were counted
        assert values(ui, "outcomes", "done") == [7, 54, done_now]  # oldest first
        assert values(ui, "outcomes", "dead") == [1, dead_now]
        assert values(ui, "lag", "lag") == [12, 95]
        labels = texts(ui, "#chart-outcomes .dc-axis-x text")
        first = now - dt.timedelta(minutes=59)
        assert labels == [f"{first + dt.timedelta(minutes=10 * i):%H:%M}" for i in range(6)]
        assert texts(ui, "#chart-outcomes .dc-legend text") == ["done", "failed", "dead"]
        assert texts(ui, "#chart-outcomes .dc-axis-y text")[0] == "0"
        # Readable at 1280 px: the two charts side by side, ~480 px each, nothing cut.
        outcomes, lag = ui.find("#chart-outcomes").rect, ui.find("#chart-lag").rect
        assert outcomes["y"] == lag["y"] and min(outcomes["width"], lag["width"]) >= 400
        assert ui.horizontal_overflow() == 0
        ui.shot("status-charts", width=1280)

        # Live: work settled meanwhile shows up by itself, on this very page.
        ui.driver.execute_script(f"{MARKER} = 'kept'")
        updates = int(ui.find("#status-charts").get_attribute("data-updates") or 0)
        emit_and_settle(org, 4)
        done_later, _ = settled_now()
        assert done_later == done_now + 4
        wait_for(
            lambda: values(ui, "outcomes", "done")[-1:] == [done_later],
            timeout=60,
            what=lambda: f"the live update: {values(ui, 'outcomes', 'done')}",
        )
        assert in_place(ui)
        assert int(ui.find("#status-charts").get_attribute("data-updates")) > updates
        assert "live · updated" in ui.find("#dc-charts-live").text
        ui.shot("status-charts-live", width=1280)

        ui.click_link("24 h", within="#status-charts")
        redrawn(ui, "outcomes", "Last 24 hours, per 15 minutes")
        assert texts(ui, "[data-chart-title=lag]") == ["Lag, last 24 hours (per 15 minutes)"]
        assert len(texts(ui, "#chart-outcomes .dc-axis-x text")) == 6  # every four hours
        assert sum(values(ui, "outcomes", "done")) == 7 + 54 + done_later
        assert "range=24h" in browser.current_url and in_place(ui)
        ui.shot("status-charts-24h", width=1280)

        ui.click_link("7 d", within="#status-charts")
        redrawn(ui, "outcomes", "Last 7 days, per hour")
        ticks = texts(ui, "#chart-outcomes .dc-axis-x text")
        assert len(ticks) == 4 and all(re.fullmatch(r"\d\d-\d\d \d\d:00", t) for t in ticks)
        assert sum(values(ui, "outcomes", "done")) == 7 + 54 + done_later
        assert ui.find("a.dc-range-on").text == "7 d" and in_place(ui)

        ui.click_link("1 h", within="#status-charts")
        redrawn(ui, "outcomes", "Last hour, per minute")
        ui.find(f"select[name=organization] option[value='{other.pk}']").click()
        ui.find(".dc-chart-filters button").click()
        wait_for(
            lambda: values(ui, "outcomes", "done") == [50],
            timeout=30,
            what=lambda: f"the organization filter: {values(ui, 'outcomes', 'done')}",
        )
        assert values(ui, "outcomes", "dead") == [] and in_place(ui)
        assert f"organization={other.pk}" in browser.current_url
        ui.shot("status-charts-one-organization", width=1280)
