"""Event list reads: a page is an index range scan, never a scan of the whole log."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.db import connection
from django.db.models import Exists, OuterRef, Q
from django.test.utils import CaptureQueriesContext

import eventbus
from core.db import bound_cursor
from core.models import Organization
from eventbus.operations import selectors
from eventbus.store.models import Delivery, EventLog

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


def plan_of_page(org: Organization, before: tuple[dt.datetime, uuid.UUID] | None) -> str:
    with CaptureQueriesContext(connection) as queries:
        rows = selectors.events_page(
            organization_id=org.pk, filters=selectors.EventFilters(), before=before, limit=51
        )
    assert len(rows) == 51
    assert len(queries.captured_queries) == 1
    sql, params = selectors.page_statement(org.pk, selectors.EventFilters(), before, 51)
    with bound_cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
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


def orm_page(
    org: Organization,
    filters: selectors.EventFilters,
    before: tuple[dt.datetime, uuid.UUID] | None,
    limit: int,
) -> list[EventLog]:
    """The same page through the ORM (what events_page ran before it kept its statements)."""
    conditions = {
        "status__in": filters.statuses,
        "event_type": filters.event_type,
        "entity_kind": filters.entity_kind,
        "entity_id": filters.entity_id,
        "created_at__gte": filters.created_after,
        "created_at__lt": filters.created_before,
    }
    events = EventLog.objects.filter(
        organization_id=org.pk, **{k: v for k, v in conditions.items() if v is not None}
    )
    if filters.consumer is not None:
        fanned_out = Delivery.objects.filter(event_id=OuterRef("pk"), consumer=filters.consumer)
        events = events.filter(Exists(fanned_out))
    if before is not None:
        events = events.filter(created_at__lte=before[0]).filter(
            Q(created_at__lt=before[0]) | Q(id__lt=before[1])
        )
    return list(events.order_by("-created_at", "-id")[:limit])


def test_every_filter_shape_reads_what_the_orm_reads(org: Organization) -> None:
    other = Organization.objects.create(name="other", slug="other")
    entity = uuid.uuid4()
    start = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    for minute in range(6):
        with time_machine.travel(start + dt.timedelta(minutes=minute), tick=False):
            for tenant in (org, other):
                eventbus.emit_many(
                    [
                        {"event_type": "test.job", "entity_kind": "lead", "payload": {"n": 1}},
                        {
                            "event_type": "test.job",
                            "entity_kind": "t",
                            "entity_id": entity,
                            "payload": {"n": 2},
                        },
                        {
                            "event_type": "test.effect",
                            "entity_kind": "t",
                            "payload": {"n": 3},
                            "metadata": {"m": 2},
                        },
                    ],
                    organization=tenant,
                )
    EventLog.objects.filter(entity_kind="lead").update(status="dead")
    some = EventLog.objects.filter(organization=org).order_by("-created_at", "-id")[4]
    consumer = "effect-a-worker"  # test.effect's deliveries; the other events have none
    shapes = [
        selectors.EventFilters(),
        selectors.EventFilters(statuses=["dead"]),
        selectors.EventFilters(statuses=["pending", "dead"], event_type="test.job"),
        selectors.EventFilters(statuses=[]),
        selectors.EventFilters(entity_kind="t", entity_id=entity),
        selectors.EventFilters(created_after=start + dt.timedelta(minutes=2)),
        selectors.EventFilters(created_before=start + dt.timedelta(minutes=4)),
        selectors.EventFilters(consumer=consumer),
        selectors.EventFilters(consumer="nobody"),
    ]
    compared = 0
    for filters in shapes:
        for before in (None, (some.created_at, some.id)):
            expected = orm_page(org, filters, before, 7)
            got = selectors.events_page(
                organization_id=org.pk, filters=filters, before=before, limit=7
            )
            assert [e.id for e in got] == [e.id for e in expected], (filters, before)
            for mine, theirs in zip(got, expected, strict=True):
                fields = [f.attname for f in EventLog._meta.concrete_fields]
                assert [getattr(mine, f) for f in fields] == [getattr(theirs, f) for f in fields]
                assert not mine._state.adding
            compared += len(expected)
    assert compared > 50  # the shapes found events, not only empty pages
