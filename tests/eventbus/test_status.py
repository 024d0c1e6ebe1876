"""Bus status: backlog, lag, DLQ and throughput per type/consumer and per organization."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from html import unescape as html_unescape

import pytest
import time_machine
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.operations.status import bus_status
from eventbus.store.registry import make_consumer, registry
from tests.support.admin import staff
from tests.support.dlq import drain, make_dead

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
STATUS = reverse("eventbus_ops:status")
CHARTS = reverse("eventbus_ops:status-charts")


def later(event: eventbus.Event) -> None:
    """A consumer with an initial delay: its work is pending but not due."""


@pytest.fixture
def traffic(org: Organization, org_b: Organization, side_effects: None) -> Iterator[None]:
    with registry.temporarily(
        make_consumer("later-worker", later, events=["test.job"], delay=dt.timedelta(days=1))
    ):
        with time_machine.travel(T0 - dt.timedelta(hours=2), tick=False):
            eventbus.emit_many(
                [
                    {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": i}}
                    for i in range(4)
                ],
                organization=org,
            )
            eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": 1})
        with time_machine.travel(T0 - dt.timedelta(minutes=32), tick=False):
            drain(["effect-a-worker"])  # 4 done, 32 minutes ago
        with time_machine.travel(T0 - dt.timedelta(minutes=10), tick=False):
            make_dead(org_b, 2)
        with time_machine.travel(T0 - dt.timedelta(minutes=1), tick=False):
            claims.claim(consumers=["effect-b-worker"], batch_size=2, worker_id="w:1")  # in flight
        yield


def test_backlog_lag_dead_and_throughput_per_type_and_consumer(traffic: None) -> None:
    status = bus_status(now=T0)
    rows = {row.key: row.counts for row in status.by_type}
    a = rows[("test.effect", "effect-a-worker")]
    assert (a.pending, a.processing, a.dead, a.done) == (0, 0, 0, 4)
    assert a.throughput[5] == 4 and sum(a.throughput) == 4  # 28 min into the hour: bucket 6 of 12
    b = rows[("test.effect", "effect-b-worker")]
    assert (b.pending, b.due, b.processing) == (2, 2, 2)
    c = rows[("test.effect", "effect-c-worker")]
    assert (c.pending, c.due, c.oldest_due_at) == (4, 4, T0 - dt.timedelta(hours=2))
    delayed = rows[("test.job", "later-worker")]
    assert (delayed.pending, delayed.due, delayed.oldest_due_at) == (1, 0, None)
    flaky = rows[("test.flaky", "flaky-worker")]
    assert (flaky.dead, flaky.done) == (2, 0)
    totals = status.totals
    assert (totals.pending, totals.due, totals.processing, totals.dead, totals.done) == (
        7,
        6,
        2,
        2,
        4,
    )
    assert totals.oldest_due_at == T0 - dt.timedelta(hours=2)


def test_per_organization_breakdown(traffic: None, org: Organization, org_b: Organization) -> None:
    status = bus_status(now=T0)
    by_org = {row.key[1]: row.counts for row in status.by_organization}
    acme, beta = by_org["Acme"], by_org["Beta"]
    assert (acme.pending, acme.processing, acme.dead, acme.done) == (7, 2, 0, 4)
    assert (beta.pending, beta.dead) == (0, 2)
    assert status.by_organization[0].key == (str(org.pk), "Acme")  # busiest first


def test_failures_fail_rate_and_emit_to_done_latency(traffic: None) -> None:
    status = bus_status(now=T0)
    rows = {row.key: row.counts for row in status.by_type}
    a = rows[("test.effect", "effect-a-worker")]
    assert (a.failed, a.fail_rate) == (0, 0.0)
    # Emitted 2 h before T0, done 32 min before it: 88 minutes from emit to done.
    assert a.latency_p50 == a.latency_p95 == dt.timedelta(minutes=88)
    flaky = rows[("test.flaky", "flaky-worker")]
    assert (flaky.failed, flaky.fail_rate, flaky.latency_p50) == (2, 1.0, None)
    c = rows[("test.effect", "effect-c-worker")]
    assert (c.failed, c.fail_rate, c.latency_p50) == (0, None, None)  # nothing ended yet
    assert status.totals.failed == 2
    assert status.totals.fail_rate == pytest.approx(2 / 6)  # 2 failed, 4 done
    later = bus_status(now=T0 + dt.timedelta(minutes=55))  # the failures are 65 min old
    assert later.totals.failed == 0


def test_work_finished_before_the_hour_is_not_throughput(traffic: None) -> None:
    status = bus_status(now=T0 + dt.timedelta(minutes=40))  # the 4 acks are 72 min old now
    assert status.totals.done == 0


def test_status_page_draws_tables_and_svg_charts_without_a_cdn(
    client: Client, traffic: None
) -> None:
    client.force_login(staff("oncall", "eventbus.view_delivery"))
    with time_machine.travel(T0, tick=False):
        response = client.get(STATUS)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.count("<svg") >= 5
    assert "effect-c-worker" in html and "2 h 0 min" in html  # lag of the oldest due work
    assert "1 h 28 min / 1 h 28 min" in html  # effect-a: emit -> done, p50 / p95
    assert "100%" in html and "33.3%" in html  # flaky's fail rate; the hour's overall
    dlq = reverse("admin:eventbus_deadletter_changelist")
    assert f"{dlq}?event_type=test.flaky&amp;consumer=flaky-worker" in html
    assert "Beta" in html
    # (the CSRF token is random letters: "cdn" turned up in one once)
    assert "cdn" not in re.sub(r'name="csrfmiddlewaretoken" value="\w+"', "", html).lower()
    assert 'src="http' not in html and 'href="http' not in html


def test_status_page_needs_the_view_delivery_permission(client: Client) -> None:
    client.force_login(staff("someone"))
    assert client.get(STATUS).status_code == 403
    client.logout()
    assert client.get(STATUS).status_code == 302  # to the login page


def test_status_charts_are_drawn_from_the_rollup_and_filtered(
    client: Client, traffic: None, org: Organization, org_b: Organization
) -> None:
    client.force_login(staff("oncall", "eventbus.view_delivery"))
    with time_machine.travel(T0, tick=False):
        html = client.get(STATUS).content.decode()
        day = client.get(STATUS, {"range": "24h"}).content.decode()
        acme = client.get(STATUS, {"organization": str(org.pk)}).content.decode()
        consumer = client.get(STATUS, {"consumer": "effect-b-worker"}).content.decode()
        unknown = client.get(STATUS, {"organization": "not-an-id"}).content.decode()
    for chart in ("outcomes", "lag"):
        assert f'id="chart-{chart}"' in html and f'id="chart-{chart}"' in day
    # effect-a's 4 acks 32 minutes ago; org_b's 2 deaths 10 minutes ago (one per consumer).
    assert "<title>11:28 · 4 done</title>" in html
    assert "<title>11:50 · 2 dead</title>" in html
    assert "Last hour, per minute" in html and "Last 24 hours, per 15 minutes" in day
    assert "<title>11:15 · 4 done</title>" in day  # the quarter holding 11:28
    assert "11:28 · 4 done" in acme and "dead</title>" not in acme.split('id="chart-lag"')[0]
    assert "done</title>" not in consumer.split('id="chart-lag"')[0]
    assert "unknown filter value" in unknown and "11:28 · 4 done" in unknown
    assert 'id="dc-auto-refresh" data-seconds="30"' in html
    assert "eventbus/status.js" in html
    assert 'data-live-url="/admin/ops/status/charts.json" data-live-seconds="5"' in html
    ranges = re.findall(r'<a href="([^"]+)" class="dc-range[^"]*" data-range="(\w+)"', acme)
    assert [key for _, key in ranges] == ["1h", "24h", "7d"]
    assert f"organization={org.pk}" in html_unescape(ranges[2][0])  # the filters are kept


def test_the_charts_json_redraws_a_range_with_the_pages_filters(
    client: Client, traffic: None, org: Organization, org_b: Organization
) -> None:
    client.force_login(staff("oncall", "eventbus.view_delivery"))
    with time_machine.travel(T0, tick=False):
        hour = client.get(CHARTS)
        week = client.get(CHARTS, {"range": "7d", "organization": str(org_b.pk)})
        bad = client.get(CHARTS, {"range": "1y", "organization": "not-an-id"})
    assert hour.status_code == 200 and hour["Cache-Control"].startswith("max-age=0")
    body = hour.json()
    assert (body["range"], body["as_of_text"]) == ("1h", "2026-11-02 12:00:00 UTC")
    outcomes, lag = body["charts"]
    assert (outcomes["name"], outcomes["title"], lag["name"]) == (
        "outcomes",
        "Last hour, per minute",
        "lag",
    )
    done = next(line for line in outcomes["lines"] if line["name"] == "done")
    assert [mark[3] for mark in done["marks"]] == ["11:28 · 4 done"]
    assert [tick[1] for tick in outcomes["x_ticks"]][:2] == ["11:01", "11:11"]
    weekly = week.json()["charts"][0]
    assert weekly["title"] == "Last 7 days, per hour"
    assert all(re.fullmatch(r"1[01]-\d\d \d\d:00", tick[1]) for tick in weekly["x_ticks"])
    dead = next(line for line in weekly["lines"] if line["name"] == "dead")
    assert [mark[2] for mark in dead["marks"]] == ["2"]  # org_b's only
    assert bad.status_code == 400
    assert set(bad.json()["errors"]) == {"range", "organization"}


def test_the_charts_json_needs_the_permission_and_keeps_scoped_staff_in_their_organization(
    client: Client, traffic: None, org: Organization, org_b: Organization
) -> None:
    client.force_login(staff("someone"))
    assert client.get(CHARTS).status_code == 403
    client.force_login(staff("acme-ops", "eventbus.view_delivery", organizations=[org]))
    with time_machine.travel(T0, tick=False):
        asked_for_b = client.get(CHARTS, {"organization": str(org_b.pk)})
        everything = client.get(CHARTS)
    assert asked_for_b.status_code == 400  # not one of its organizations
    outcomes = everything.json()["charts"][0]
    values = {line["name"]: [m[2] for m in line["marks"]] for line in outcomes["lines"]}
    assert values == {"done": ["4"], "failed": [], "dead": []}  # acme's acks, not b's deaths


def test_a_live_update_reads_the_newest_steps_only(client: Client, traffic: None) -> None:
    """Polled every few seconds by every open status page: a fixed number of statements, and a
    week's chart reads the rollup's last two hours, not 10,080 minutes (the rest is cached)."""
    client.force_login(staff("oncall", "eventbus.view_delivery"))
    with time_machine.travel(T0, tick=False):
        client.get(CHARTS, {"range": "7d"})  # the ended steps go to the cache
        with CaptureQueriesContext(connection) as queries:
            assert client.get(CHARTS, {"range": "7d"}).status_code == 200
    # session, user, two permission lookups, the admin's scope and its reset, organizations,
    # the rollup
    assert len(queries) <= 8, [q["sql"][:80] for q in queries]
    [series] = [q["sql"] for q in queries if "rollup_series" in q["sql"]]
    assert "bucket_start >= '2026-11-02 11:00:00+00:00'" in series


def test_chart_axes_are_round_and_labelled() -> None:
    from eventbus.admin.charts import Series, line_chart

    times = [T0 + dt.timedelta(minutes=i) for i in range(60)]
    chart = line_chart("c", "t", times, [Series("done", "done", [0] * 59 + [130])], tick_every=10)
    assert [t.label for t in chart.y_ticks] == ["0", "100", "200"]
    assert [t.label for t in chart.x_ticks] == [
        "12:00",
        "12:10",
        "12:20",
        "12:30",
        "12:40",
        "12:50",
    ]
    [mark] = chart.lines[0].marks
    assert (mark.value, mark.title) == (130, "12:59 · 130 done")
    assert chart.lines[0].path.count(",") == 60
