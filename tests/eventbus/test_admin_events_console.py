"""The event browser's header count agrees with its footer; system events are hidden by default."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import eventbus
from core.models import Organization

pytestmark = pytest.mark.django_db

EVENTS = reverse("admin:eventbus_eventlog_changelist")


@pytest.fixture
def viewer(client: Client) -> Client:
    user: User = User.objects.create_superuser("viewer", password="pw-Console-1")
    client.force_login(user)
    return client


def emit(org: Organization, n: int, event_type: str = "test.effect") -> list[uuid.UUID]:
    items = [
        {"event_type": event_type, "entity_kind": "thing", "payload": {"n": i}} for i in range(n)
    ]
    return eventbus.emit_many(items, organization=org)


def listed(client: Client, query: str = "") -> set[uuid.UUID]:
    response = client.get(f"{EVENTS}?{query}")
    assert response.status_code == 200, response.content[:300]
    return {e.pk for e in response.context["cl"].result_list}


def test_header_and_footer_both_say_more_than_when_capped(
    viewer: Client, org: Organization
) -> None:
    emit(org, 260)
    html = viewer.get(EVENTS).content.decode()
    assert 'id="result-count">more than 250 results<' in html
    assert "more than 250 events" in html
    assert "251 results" not in html


def test_below_the_cap_the_header_count_is_exact(viewer: Client, org: Organization) -> None:
    emit(org, 3)
    assert "3 results" in viewer.get(EVENTS).content.decode()


def test_system_organization_events_are_hidden_by_default_with_a_toggle(
    viewer: Client, org: Organization
) -> None:
    ours = set(emit(org, 2))
    system = set(emit(Organization.objects.system(), 3))
    page = viewer.get(EVENTS).content.decode()
    assert listed(viewer) == ours
    assert 'id="system-hidden"' in page and "?system=shown" in page
    assert listed(viewer, "system=shown") == ours | system
    assert 'id="system-hidden"' not in viewer.get(f"{EVENTS}?system=shown").content.decode()


def test_a_filter_shows_what_it_matches_system_events_included(
    viewer: Client, org: Organization
) -> None:
    ours = set(emit(org, 1, event_type="test.job"))
    system = set(emit(Organization.objects.system(), 1, event_type="test.job"))
    emit(org, 1)
    assert listed(viewer, "event_type=test.job") == ours | system
    assert system.isdisjoint(listed(viewer, "o=-1"))  # a new order is still the default view


def test_system_events_show_when_their_organization_or_id_is_asked_for(
    viewer: Client, org: Organization
) -> None:
    emit(org, 1)
    system = emit(Organization.objects.system(), 2)
    assert listed(viewer, f"organization={Organization.objects.system().pk}") == set(system)
    assert listed(viewer, f"q={system[0]}") == {system[0]}


def test_an_unknown_toggle_value_is_refused(viewer: Client) -> None:
    response = viewer.get(f"{EVENTS}?system=maybe")
    assert (response.status_code, response["Location"]) == (302, f"{EVENTS}?e=1")
