"""The console's search box finds what an operator types (issue 44, items 2 and 8): part of an
event type, a consumer or an error, the start of an id, and the short id the DLQ shows, which is
the part of a time-ordered id that differs from row to row."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import Client
from django.urls import reverse

import eventbus
from core.models import Organization
from eventbus.admin import search
from tests.support.admin import CONSOLE_READER, staff
from tests.support.dlq import make_dead, webhook_dead_letter

pytestmark = pytest.mark.django_db

DLQ = reverse("admin:eventbus_deadletter_changelist")
EVENTS = reverse("admin:eventbus_eventlog_changelist")
DELIVERIES = reverse("admin:eventbus_delivery_changelist")


@pytest.fixture
def ops(client: Client) -> Client:
    client.force_login(staff("ops", *CONSOLE_READER))
    return client


def listed(client: Client, url: str, term: str) -> set[object]:
    response = client.get(url, {"q": term})
    assert response.status_code == 200, response.content[:500]
    return {row.pk for row in response.context["cl"].result_list}


def test_each_letter_shows_the_part_of_its_id_that_differs(ops: Client, org: Organization) -> None:
    letters = make_dead(org, 3)  # one batch: the first characters of their ids are alike
    assert len({str(d.event_id)[:8] for d in letters}) == 1
    html = ops.get(DLQ).content.decode()
    shown = re.findall(r'<code><a href="[^"]+">(…[0-9a-f]{8})</a></code>', html)
    assert sorted(shown) == sorted(f"…{str(d.event_id)[-8:]}" for d in letters)
    assert len(set(shown)) == 3


def test_the_short_id_shown_finds_its_letter_event_and_delivery(
    ops: Client, org: Organization
) -> None:
    letters = make_dead(org, 3)
    target = letters[1]
    short = str(target.event_id)[-8:]
    assert listed(ops, DLQ, f"…{short}") == {target.pk}
    assert listed(ops, DLQ, short) == {target.pk}
    assert listed(ops, DLQ, f"...{short.upper()}") == {target.pk}
    assert listed(ops, EVENTS, short) == {target.event_id}
    assert listed(ops, DELIVERIES, f"…{short}") == {target.pk}


def test_the_start_of_an_event_or_entity_id_finds_it(ops: Client, org: Organization) -> None:
    entity = uuid.uuid4()
    (dead,) = make_dead(org, 1, entity_id=entity)
    others = make_dead(org, 2)
    start = str(dead.event_id)[:23]  # time and random digits, dashes included
    assert listed(ops, DLQ, start) == {dead.pk}
    assert listed(ops, EVENTS, start) == {dead.event_id}
    assert listed(ops, DELIVERIES, start) == {dead.pk}
    assert listed(ops, EVENTS, start.replace("-", "")) == {dead.event_id}
    assert listed(ops, EVENTS, str(entity)[:13]) == {dead.event_id}
    assert listed(ops, DLQ, str(entity)[:13]) == {dead.pk}
    # A short start (the time digits) matches every event of the period: all of them here.
    everything = {d.event_id for d in (dead, *others)}
    assert listed(ops, EVENTS, str(dead.event_id)[:6]) >= everything


def test_part_of_an_event_type_finds_its_events_and_letters(ops: Client, org: Organization) -> None:
    flaky = make_dead(org, 2)
    effects = eventbus.emit_many(
        [{"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": 1}}],
        organization=org,
    )
    assert listed(ops, DLQ, "test.fla") == {d.pk for d in flaky}
    assert listed(ops, EVENTS, "test.fla") == {d.event_id for d in flaky}
    assert listed(ops, EVENTS, "TEST.FLAKY") == {d.event_id for d in flaky}
    assert listed(ops, EVENTS, "effect") == set(effects)


def test_part_of_a_consumer_name_or_label_finds_its_deliveries(
    ops: Client, org: Organization
) -> None:
    _, webhook = webhook_dead_letter(org, description="Order sync")
    (plain,) = make_dead(org, 1)
    assert listed(ops, DLQ, "order sy") == {webhook.pk}
    assert listed(ops, DLQ, "hooks.example") == {webhook.pk}
    assert listed(ops, DLQ, "flaky-wor") == {plain.pk}
    assert listed(ops, DELIVERIES, "Order Sync") == {webhook.pk}


def test_part_of_an_error_text_finds_it_in_any_case(ops: Client, org: Organization) -> None:
    (dead,) = make_dead(org, 1)  # RuntimeError: flaky-worker always fails (n=0)
    _, webhook = webhook_dead_letter(org)
    assert listed(ops, DLQ, "ALWAYS FAILS") == {dead.pk}
    assert listed(ops, DLQ, "nothing was sent") == {webhook.pk}
    assert listed(ops, DELIVERIES, "always fails") == {dead.pk}
    assert listed(ops, DLQ, "100%_sure") == set()  # LIKE wildcards are text here
    assert listed(ops, DLQ, "no such words anywhere") == set()


def test_a_delivery_number_finds_that_delivery(ops: Client, org: Organization) -> None:
    dead, other = make_dead(org, 2)
    assert dead.pk in listed(ops, DELIVERIES, str(dead.pk))
    assert other.pk not in listed(ops, DELIVERIES, str(dead.pk))


def test_terms_are_parsed_as_what_they_can_be_part_of() -> None:
    assert search.parse("…1A2b3C4d").hex == "1a2b3c4d"
    assert search.parse("…1a2b3c4d").id_range is None  # shown as a suffix: not a start
    assert search.parse("01a2-3f").id_range == (
        uuid.UUID("01a23f00-0000-0000-0000-000000000000"),
        uuid.UUID("01a23fff-ffff-ffff-ffff-ffffffffffff"),
    )
    assert search.parse("abc").id_range is None  # too short to be worth a range
    assert search.parse("lead.created").hex == ""
    last_group = "1a2b3c4d5e6f"  # pragma: allowlist secret
    assert search.parse(last_group).suffix == last_group
    # longer than a uuid's last group:
    assert search.parse(last_group + "7").suffix == ""
