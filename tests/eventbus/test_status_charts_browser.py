"""The status page's charts in a real browser, drawn from real rollup rows.

A drain settles deliveries (done, retried, dead) through the real settle statements, which write
this minute's rollup rows; earlier minutes and lag samples are rollup rows written directly. The
test reads the SVG the browser rendered: one series per outcome with a marked point for each
non-zero minute, the time axis labelled every ten minutes, the legend, and a filter that scopes
the charts to one organization. Screenshots go to test-artifacts/admin/.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus import rollup
from eventbus.models import Rollup
from eventbus.registry import make_consumer, registry
from tests.support.admin import staff
from tests.support.browser import ARTIFACTS, Console
from tests.support.dlq import BROKEN, broken_consumer, drain

PASSWORD = "pw-Charts-1"

pytestmark = pytest.mark.slow


def seed(org: Organization, other: Organization) -> dt.datetime:
    """Real settles now (done and dead), and rollup rows 20 and 5 minutes ago; returns the
    minute of the real settles."""
    fine = make_consumer("charts-ok-worker", lambda event: None, events=["test.job"])
    with broken_consumer(), registry.temporarily(fine):
        for n in range(3):
            eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": n})
        assert drain([BROKEN, "charts-ok-worker"]) == 6
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


def values(ui: Console, chart: str, series: str) -> list[float]:
    css = f"#chart-{chart} g[data-series={series}] circle"
    circles = ui.driver.find_elements(ui.by.CSS_SELECTOR, css)
    return [float(circle.get_attribute("data-value")) for circle in circles]


def texts(ui: Console, css: str) -> list[str]:
    return [e.text for e in ui.driver.find_elements(ui.by.CSS_SELECTOR, css)]


@pytest.mark.django_db(transaction=True)
def test_status_charts_draw_the_rollup_with_axes_legend_and_filters(
    browser: Any, live_server: Any
) -> None:
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
        browser.set_window_size(1280, 1000)
        ui.open("/admin/ops/status/")
        ui.wait_for_text("Last hour, per minute")

        live = Rollup.objects.filter(bucket_start__gte=now)
        done_now = sum(r.done for r in live)
        dead_now = sum(r.dead for r in live)
        failed_now = sum(r.failed for r in live)
        assert done_now and dead_now  # the drain's own settles were counted
        assert values(ui, "hour", "done") == [7, 54, done_now]  # oldest first
        assert values(ui, "hour", "failed") == [2] + ([failed_now] if failed_now else [])
        assert values(ui, "hour", "dead") == [1, dead_now]
        assert values(ui, "lag-hour", "lag") == [12, 95]
        labels = texts(ui, "#chart-hour .dc-axis-x text")
        first = now - dt.timedelta(minutes=59)
        assert labels == [f"{first + dt.timedelta(minutes=10 * i):%H:%M}" for i in range(6)]
        assert texts(ui, "#chart-hour .dc-legend text") == ["done", "failed", "dead"]
        assert texts(ui, "#chart-hour .dc-axis-y text")[0] == "0"
        assert len(texts(ui, "#chart-day .dc-axis-x text")) == 6  # every four hours over the day
        assert sum(values(ui, "day", "done")) == 7 + 54 + done_now
        ui.shot("status-charts")
        browser.set_window_size(1280, 1400)  # readable at 1280 px: two charts a row, ~480 px each
        hour, day = ui.find("#chart-hour").rect, ui.find("#chart-day").rect
        assert hour["y"] == day["y"] and min(hour["width"], day["width"]) >= 400
        assert browser.save_screenshot(str(ARTIFACTS / "status-charts-1280.png"))

        ui.find(f"select[name=organization] option[value='{other.pk}']").click()
        ui.find(".dc-chart-filters button").click()
        ui.wait_for_text("all organizations")
        ui.find("#chart-hour")
        assert values(ui, "hour", "done") == [50]
        assert values(ui, "hour", "dead") == []
        ui.shot("status-charts-one-organization")
