"""The console's list queries cost what a page costs, whatever the size of the tables.

Every query a changelist runs against the bus tables is re-run under EXPLAIN (ANALYZE, BUFFERS)
twice: with a small log, then after ten times more (newer) events were added. A query served by
an index reads about the same number of buffers both times; a filter without a usable index, a
full COUNT(*), a substring search or a walk through a whole index grows with the table and fails.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
import time_machine
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

import eventbus
from core.models import Organization
from eventbus.operations import services
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import make_dead, make_retrying

# Transactional, so the tables can be vacuumed: dead rows that earlier tests' rollbacks left (and
# autovacuum, on a busy machine, has not cleared yet) would otherwise count as buffers read.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)
BATCH = 200
SMALL, LARGE = 10, 100  # batches: 2,000 then 20,000 events (x3 deliveries)
ENTITY = uuid.UUID("00000000-0000-4000-8000-00000000beef")


def seed_rare(org: Organization, org_b: Organization) -> dict[str, str]:
    """A few old, rare rows every filter below looks for (bulk rows are all newer)."""
    with time_machine.travel(T0 - dt.timedelta(days=2), tick=False):
        rare = eventbus.emit_many(
            [
                {"event_type": "test.slow", "entity_kind": "lead", "payload": {"n": i}}
                for i in range(5)
            ],
            organization=org_b,
        )
        eventbus.emit(
            "test.job", organization=org, entity_kind="lead", entity_id=ENTITY, payload={"n": 1}
        )
        dead = make_dead(org, 3, request_id="req-plan-1")
        services.deliveries_discard(delivery_ids=[dead[2].pk], actor="test", reason="plan")
        make_retrying(org, 1)
    return {
        "org": str(org.pk),
        "org_b": str(org_b.pk),
        "rare_event": str(rare[0]),
        "rare_start": str(rare[0])[:23],
        "dead_short": str(dead[0].event_id)[-8:],
    }


def seed_bulk(org: Organization, batches: range) -> None:
    for batch in batches:
        with time_machine.travel(T0 + dt.timedelta(seconds=batch), tick=False):
            eventbus.emit_many(
                [
                    {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}}
                    for i in range(BATCH)
                ],
                organization=org,
            )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE event_log")
        cursor.execute("VACUUM ANALYZE eventbus_delivery")


def buffers(sql: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql)
        (row,) = cursor.fetchone()
    plan = (json.loads(row) if isinstance(row, str) else row)[0]["Plan"]
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def plan_text(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def bus_queries(client: Client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return [
        q["sql"]
        for q in captured
        if q["sql"].lstrip().upper().startswith(("SELECT", "WITH"))
        and ("event_log" in q["sql"] or "eventbus_delivery" in q["sql"])
    ]


URLS = [
    "/admin/eventbus/eventlog/",
    "/admin/eventbus/eventlog/?organization={org_b}",
    "/admin/eventbus/eventlog/?event_type=test.slow",
    "/admin/eventbus/eventlog/?organization={org}&event_type=test.job",
    "/admin/eventbus/eventlog/?entity_kind=lead",
    "/admin/eventbus/eventlog/?entity_kind=thing",
    "/admin/eventbus/eventlog/?status=dead",
    "/admin/eventbus/eventlog/?q=" + str(ENTITY),
    "/admin/eventbus/eventlog/?q={rare_event}",
    "/admin/eventbus/eventlog/?q=req-plan-1",
    "/admin/eventbus/eventlog/?p=3",
    "/admin/eventbus/deadletter/",
    "/admin/eventbus/deadletter/?consumer=flaky-worker&event_type=test.flaky",
    "/admin/eventbus/deadletter/?q=req-plan-1",
    "/admin/eventbus/delivery/",
    "/admin/eventbus/delivery/?consumer=effect-a-worker&status=pending",
    "/admin/ops/correlation/?request_id=req-plan-1",
    # Partial search (eventbus/admin/search.py): each branch served by an index.
    "/admin/eventbus/eventlog/?q=test.sl",
    "/admin/eventbus/eventlog/?q={rare_start}",
    "/admin/eventbus/eventlog/?q={dead_short}",
    "/admin/eventbus/deadletter/?q={dead_short}",
    "/admin/eventbus/deadletter/?q=always+fails",
    "/admin/eventbus/deadletter/?q=flaky-wor",
    "/admin/eventbus/deadletter/?q=test.fla",
    "/admin/eventbus/delivery/?q={dead_short}",
    "/admin/eventbus/delivery/?q={rare_start}",
    "/admin/eventbus/delivery/?q=always+fails",
    "/admin/eventbus/delivery/?status=retrying",
    "/admin/eventbus/delivery/?status=discarded",
]


def page_costs(client: Client, urls: list[str]) -> dict[str, int]:
    """URL -> the most buffers any of its bus-table queries read."""
    return {url: max(buffers(sql) for sql in bus_queries(client, url)) for url in urls}


def test_list_queries_cost_a_page_not_the_table(
    client: Client, org: Organization, org_b: Organization
) -> None:
    client.force_login(
        staff("planner", *DLQ_OPERATOR, "eventbus.view_eventlog", "eventbus.view_delivery")
    )
    ids = seed_rare(org, org_b)
    urls = [url.format(**ids) for url in URLS]
    seed_bulk(org, range(SMALL))
    small = page_costs(client, urls)
    seed_bulk(org, range(SMALL, LARGE))
    large = page_costs(client, urls)
    # Ten times the rows: a query that walks the table (or an index of it) reads about ten times
    # the buffers, and at 2,000 events even the smallest walk reads 40 or more (event_log's
    # pages), so 400 or more at 20,000. A page served by an index reads about the same; the
    # allowance (3x + 30) absorbs a few more heap visits when the machine is busy (seen on a
    # loaded run: the delivery list 9 -> 30, with nothing walking the table), far below a walk.
    grew = {url: (small[url], large[url]) for url in urls if large[url] > 3 * small[url] + 30}
    assert not grew, f"buffers (2k events, 20k events) that grew with the table: {grew}"
