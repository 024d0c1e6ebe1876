"""Event list reads: a page is an index range scan, never a scan of the whole log."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

import eventbus
from core.models import Organization
from eventbus import selectors

pytestmark = pytest.mark.django_db


def fill(orgs: list[Organization], batches: int, size: int) -> None:
    """`batches` emit_many calls per organization, each at its own time (ties within a batch)."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    items = [
        {"event_type": "test.job", "entity_kind": "t", "payload": {"n": i}} for i in range(size)
    ]
    for batch in range(batches):
        with time_machine.travel(start + dt.timedelta(minutes=batch), tick=False):
            for org in orgs:
                eventbus.emit_many(items, organization=org)


def plan_of_page(org: Organization, before: tuple[dt.datetime, object] | None) -> str:
    with CaptureQueriesContext(connection) as queries:
        rows = selectors.events_page(
            organization_id=org.pk, filters=selectors.EventFilters(), before=before, limit=51
        )
    assert len(rows) == 51
    (query,) = queries.captured_queries
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {query['sql']}")
        return "\n".join(row[0] for row in cursor.fetchall())


def test_a_page_is_an_index_range_bounded_by_organization_and_cursor(org: Organization) -> None:
    """Many tenants (so the organization is selective), ties on created_at within each batch."""
    others = [Organization.objects.create(name=f"o{i}", slug=f"o{i}") for i in range(39)]
    fill([org, *others], batches=12, size=10)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE event_log")
    first = selectors.events_page(
        organization_id=org.pk, filters=selectors.EventFilters(), before=None, limit=55
    )
    # The second page starts inside a tie. The planner picks its index by the data (the
    # organization's indexes, ordered or as a bitmap bounded by the cursor, or event_log_created_idx
    # filtered by organization); every choice reads an index range under a LIMIT, never the table.
    for before in (None, (first[-1].created_at, first[-1].id)):
        plan = plan_of_page(org, before)
        assert plan.startswith("Limit"), plan
        assert "Seq Scan" not in plan, plan
        assert "Index Scan" in plan, plan
