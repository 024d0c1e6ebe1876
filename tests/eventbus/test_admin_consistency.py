"""The bus's admin pages say the same thing the same way: the DLQ's filters offer only what
narrows the DLQ, a delivery shows a next attempt only while it waits for one, an event links
the event that caused it, and a dead event's page reprocesses it as the DLQ does."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

import eventbus
from core.models import AuditLog, Organization
from eventbus.store.models import Delivery
from tests.support.dlq import make_dead

pytestmark = pytest.mark.django_db

DLQ = "/admin/eventbus/deadletter/"


@pytest.fixture
def ops(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("ops"))
    return client


def filter_choices(html: str, title: str) -> list[str]:
    """The choices of the list filter titled `title` in a changelist's sidebar."""
    section = html.split(f"By {title}", 1)[1].split("</details>", 1)[0]
    return [
        re.sub(r"\s+", " ", label).strip() for label in re.findall(r">([^<>]+)</a></li>", section)
    ]


def test_the_dlq_filters_offer_only_what_narrows_the_dlq(ops: Client, org: Organization) -> None:
    make_dead(org, 1, entity_kind="contact")
    eventbus.emit("test.effect", organization=org, entity_kind="conversation", payload={"n": 1})
    html = ops.get(DLQ).content.decode()
    assert filter_choices(html, "entity kind") == ["All", "contact"]  # not "conversation"
    assert filter_choices(html, "died") == [
        "Any date",
        "Today",
        "Past 7 days",
        "This month",
        "This year",
    ]  # no "No date" / "Has date": every dead letter died at some time


def test_a_delivery_shows_its_next_attempt_only_while_it_waits_for_one(
    ops: Client, org: Organization
) -> None:
    event = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    done, pending, _ = Delivery.objects.filter(event_id=event.pk).order_by("id")
    Delivery.objects.filter(pk=done.pk).update(status="done", finished_at=done.next_attempt_at)
    listing = ops.get("/admin/eventbus/delivery/").content.decode()
    cells = {}
    for row in listing.split("<tr")[1:]:
        found = re.search(r"/admin/eventbus/delivery/(\d+)/change/", row)
        cell = re.search(r'class="field-next_attempt[^"]*">(.*?)</td>', row, re.S)
        if found and cell:
            cells[found.group(1)] = cell.group(1)
    assert cells[str(done.pk)] == "-"
    # "due now" / "in 30 s", the exact time in the <time> element
    assert f'datetime="{pending.next_attempt_at.isoformat()}"' in cells[str(pending.pk)]
    page = ops.get(f"/admin/eventbus/delivery/{done.pk}/change/").content.decode()
    shown = re.search(r'field-next_attempt.*?<div class="readonly">([^<]*)</div>', page, re.S)
    assert shown is not None and shown.group(1) == "-"


def test_an_event_links_the_event_that_caused_it(ops: Client, org: Organization) -> None:
    cause = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    child = eventbus.emit(
        "test.effect", organization=org, entity_kind="t", payload={"n": 2}, causation_id=cause.pk
    )
    html = ops.get(f"/admin/eventbus/eventlog/{child.pk}/change/").content.decode()
    assert f'<a href="/admin/eventbus/eventlog/{cause.pk}/change/">event {cause.pk}</a>' in html


def test_a_dead_events_page_reprocesses_it_as_the_dlq_does(ops: Client, org: Organization) -> None:
    (dead,) = make_dead(org, 1)
    html = ops.get(f"/admin/eventbus/eventlog/{dead.event_id}/change/").content.decode()
    form = html.split('id="reprocess-event"', 1)[0].rsplit("<form", 1)[1]
    assert f'action="{DLQ}"' in form
    assert f'name="_selected_action" value="{dead.pk}"' in form
    response = ops.post(
        DLQ, {"action": "reprocess_selected", "index": "0", "_selected_action": [dead.pk]}
    )
    assert response.status_code == 302
    dead.refresh_from_db()
    assert (dead.status, dead.attempts) == ("pending", 0)
    assert AuditLog.objects.get(action="delivery.reprocess").actor == "user:ops"
    alive = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 3})
    assert (
        'id="reprocess-event"'
        not in ops.get(f"/admin/eventbus/eventlog/{alive.pk}/change/").content.decode()
    )
