"""Event and delivery browsers: read-only, indexed filters and search, no full COUNT(*)."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import eventbus
from core import context
from core.models import Organization
from eventbus.admin import selectors
from eventbus.store.models import Delivery, EventLog
from eventbus.store.provenance import Provenance
from tests.support.admin import staff
from tests.support.dlq import make_dead

pytestmark = pytest.mark.django_db

EVENTS = reverse("admin:eventbus_eventlog_changelist")
DELIVERIES = reverse("admin:eventbus_delivery_changelist")


@pytest.fixture
def viewer(client: Client) -> Client:
    user: User = staff(
        "viewer", "eventbus.view_eventlog", "eventbus.view_delivery", "core.view_organization"
    )
    client.force_login(user)
    return client


def emit(
    org: Organization, n: int, event_type: str = "test.effect", **item: object
) -> list[uuid.UUID]:
    return eventbus.emit_many(
        [
            {"event_type": event_type, "entity_kind": "thing", "payload": {"n": i}, **item}
            for i in range(n)
        ],
        organization=org,
    )


def listed(client: Client, query: str = "") -> set[uuid.UUID]:
    response = client.get(f"{EVENTS}?{query}")
    assert response.status_code == 200, response.content[:300]
    return {e.pk for e in response.context["cl"].result_list}


def test_filters_organization_type_kind_and_dead(
    viewer: Client, org: Organization, org_b: Organization
) -> None:
    effects = set(emit(org, 2))
    lead = set(emit(org, 1, entity_kind="lead"))
    theirs = set(emit(org_b, 1))
    dead = {d.event_id for d in make_dead(org, 1)}
    assert listed(viewer, f"organization={org_b.pk}") == theirs
    assert listed(viewer, "event_type=test.flaky") == dead
    assert listed(viewer, "entity_kind=lead") == lead
    assert listed(viewer, "status=dead") == dead
    assert listed(viewer, f"organization={org.pk}&event_type=test.effect") == effects | lead
    html = viewer.get(EVENTS).content.decode()
    assert "?entity_kind=lead" in html and "?event_type=lead.stage_changed" in html


def test_search_finds_event_id_entity_id_and_request_id(viewer: Client, org: Organization) -> None:
    entity = uuid.uuid4()
    (by_entity,) = emit(org, 1, entity_id=entity)
    with context.bind(request_id="req-events-9"):
        by_request = set(emit(org, 2))
    (other,) = emit(org, 1)
    assert listed(viewer, f"q={entity}") == {by_entity}
    assert listed(viewer, f"q={other}") == {other}
    assert listed(viewer, "q=req-events-9") == by_request
    assert listed(viewer, "q=req-events") == set()  # request ids match whole (their index)


def test_detail_shows_deliveries_attempts_links_and_escapes_payload(
    viewer: Client, org: Organization
) -> None:
    hostile = {"name": "<img src=x onerror=alert(1)>", "note": "</pre><script>evil()</script>"}
    (dead,) = make_dead(org, 1, request_id="req-detail-1", payload=hostile)
    response = viewer.get(reverse("admin:eventbus_eventlog_change", args=[dead.event_id]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<script>evil()" not in html and "<img src=x" not in html
    assert "&lt;/pre&gt;&lt;script&gt;evil()&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "Deliveries (one per consumer)" in html
    assert reverse("admin:eventbus_delivery_change", args=[dead.pk]) in html
    assert reverse("admin:eventbus_deadletter_change", args=[dead.pk]) in html
    assert reverse("admin:core_organization_change", args=[org.pk]) in html
    assert f"{reverse('eventbus_ops:correlation')}?request_id=req-detail-1" in html
    assert "attempt 1" in html and "flaky-worker always fails" in html


def test_the_browser_says_who_produced_each_event(viewer: Client, org: Organization) -> None:
    [own] = emit(org, 1)
    integrators = eventbus.emit(
        "lead.won",
        organization=org,
        entity_kind="lead",
        payload={"value": 1, "won_at": "today"},
        provenance=Provenance.api_key("dck_0123456789ab"),
    )
    listing = viewer.get(EVENTS).content.decode()
    assert "api_key:dck_0123456789ab via api" in listing
    assert "app:tests (tests.eventbus.test_admin_events)" in listing
    detail = viewer.get(reverse("admin:eventbus_eventlog_change", args=[integrators.id]))
    html = detail.content.decode()
    assert "api_key:dck_0123456789ab via api" in html and "nothing on the bus" in html
    assert own != integrators.id


def test_browsers_are_read_only(viewer: Client, org: Organization) -> None:
    (event_id,) = emit(org, 1)
    delivery = Delivery.objects.filter(event_id=event_id).first()
    assert delivery is not None
    change = reverse("admin:eventbus_eventlog_change", args=[event_id])
    assert viewer.post(change, {"event_type": "test.slow"}).status_code == 403
    assert viewer.get(reverse("admin:eventbus_eventlog_add")).status_code == 403
    assert viewer.get(reverse("admin:eventbus_eventlog_delete", args=[event_id])).status_code == 403
    assert (
        viewer.get(reverse("admin:eventbus_delivery_change", args=[delivery.pk])).status_code == 200
    )
    assert EventLog.objects.get(pk=event_id).event_type == "test.effect"


def test_delivery_list_filters_by_status_and_consumer(viewer: Client, org: Organization) -> None:
    emit(org, 2)
    dead = make_dead(org, 1)
    response = viewer.get(f"{DELIVERIES}?status=dead")
    assert {d.pk for d in response.context["cl"].result_list} == {dead[0].pk}
    response = viewer.get(f"{DELIVERIES}?consumer=effect-a-worker&status=pending")
    assert len(response.context["cl"].result_list) == 2


def test_changelists_never_count_the_whole_table(viewer: Client, org: Organization) -> None:
    emit(org, 120)
    with CaptureQueriesContext(connection) as queries:
        first = viewer.get(EVENTS)
        viewer.get(f"{EVENTS}?organization={org.pk}&event_type=test.effect")
        viewer.get(DELIVERIES)
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    assert counts, "the paginator should still count up to its cap"
    assert all("LIMIT" in sql.upper() for sql in counts), counts
    html = first.content.decode()
    assert len(first.context["cl"].result_list) == 50
    assert "120 events" in html  # below the cap the count is exact


def test_pagination_says_more_than_when_the_cap_is_reached(
    viewer: Client, org: Organization, settings: object
) -> None:
    emit(org, 260)  # cap on page 1: (1 + 4) * 50 + 1 = 251
    html = viewer.get(EVENTS).content.decode()
    assert "more than 250 events" in html
    assert 'href="?p=6"' in html
    page_six = viewer.get(f"{EVENTS}?p=6")
    assert len(page_six.context["cl"].result_list) == 10


def test_undeclared_lookups_are_refused(viewer: Client, org: Organization) -> None:
    emit(org, 1)
    assert viewer.get(f"{EVENTS}?payload__icontains=x").status_code == 400
    assert viewer.get(f"{EVENTS}?organization=nope").status_code == 302  # "?e=1" error page


def test_staff_without_view_permission_gets_403(client: Client, org: Organization) -> None:
    client.force_login(staff("nobody"))
    assert client.get(EVENTS).status_code == 403


def test_consumer_choices_are_registered_done_and_dead_consumers(
    viewer: Client, org: Organization
) -> None:
    emit(org, 1)
    make_dead(org, 1)
    # A consumer the code no longer has, with finished deliveries: still offered.
    Delivery.objects.filter(consumer="effect-a-worker").update(
        consumer="retired-worker", status="done"
    )
    response = viewer.get(DELIVERIES)
    (consumer_filter,) = [
        spec for spec in response.context["cl"].filter_specs if spec.title == "consumer"
    ]
    offered = {value for value, _ in consumer_filter.lookup_choices}
    assert {"retired-worker", "effect-b-worker", "flaky-worker"} <= offered
    assert offered == set(selectors.consumer_choices())
    assert [v for v, _ in consumer_filter.lookup_choices] == sorted(offered)
