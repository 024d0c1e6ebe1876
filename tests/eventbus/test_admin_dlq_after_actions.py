"""After an operator acts on the DLQ: the letter's page says what became of it, and the list keeps
its filters and says why it is empty (issue 44, items 7 and 9)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from core.models import AuditLog, Organization
from eventbus.store.models import Delivery
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import BROKEN, broken_consumer, make_dead

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:eventbus_deadletter_changelist")
T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def ops(client: Client) -> Client:
    user: User = staff("ops", *DLQ_OPERATOR, "eventbus.view_delivery", "eventbus.view_eventlog")
    client.force_login(user)
    return client


@pytest.fixture
def broken() -> Iterator[None]:
    with broken_consumer():
        yield


def letter_url(delivery: Delivery) -> str:
    return reverse("admin:eventbus_deadletter_change", args=[delivery.pk])


def act(client: Client, action: str, delivery: Delivery, **extra: str) -> None:
    data = {"action": action, "index": "0", "_selected_action": [delivery.pk], **extra}
    assert client.post(CHANGELIST, data).status_code == 302


def test_a_reprocessed_letter_says_who_reprocessed_it_when_and_where_it_is(
    ops: Client, org: Organization
) -> None:
    (dead,) = make_dead(org, 1)
    with time_machine.travel(T0, tick=False):
        act(ops, "reprocess_selected", dead)
    response = ops.get(letter_url(dead))
    assert response.status_code == 200  # not the admin home's "doesn't exist"
    html = response.content.decode()
    assert f"Dead letter {dead.pk} is no longer in the DLQ" in html
    (row,) = re.findall(r'<tr data-action="delivery.reprocess">(.*?)</tr>', html, re.S)
    assert "2026-11-02 12:00:00 UTC" in row and "user:ops" in row and "reprocessed" in row
    assert reverse("admin:eventbus_delivery_change", args=[dead.pk]) in html
    assert reverse("admin:eventbus_eventlog_change", args=[dead.event_id]) in html
    assert '<span class="dc-badge dc-pending">pending</span>' in html


def test_a_discarded_letter_gives_the_reason(ops: Client, org: Organization) -> None:
    (dead,) = make_dead(org, 1)
    act(ops, "discard_selected", dead, post="yes", reason="test order, never real")
    html = ops.get(letter_url(dead)).content.decode()
    (row,) = re.findall(r'<tr data-action="delivery.discard">(.*?)</tr>', html, re.S)
    assert "discarded" in row and "test order, never real" in row
    assert '<span class="dc-badge dc-discarded">discarded</span>' in html


def test_a_letter_that_never_was_still_does_not_exist(ops: Client) -> None:
    response = ops.get(reverse("admin:eventbus_deadletter_change", args=[987654]), follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:index")
    assert "doesn\u2019t exist" in response.content.decode()  # the admin's own message


def test_another_organizations_letter_is_not_described(
    client: Client, org: Organization, org_b: Organization, ops: Client
) -> None:
    (dead,) = make_dead(org, 1)
    act(ops, "reprocess_selected", dead)
    outsider = staff("outsider", *DLQ_OPERATOR, organizations=[org_b])
    other = Client()
    other.force_login(outsider)
    response = other.get(letter_url(dead), follow=True)
    assert response.redirect_chain[-1][0] == reverse("admin:index")
    assert "user:ops" not in response.content.decode()


def test_after_reprocess_all_matching_the_filter_stays_and_the_list_says_why_it_is_empty(
    ops: Client, org: Organization, broken: None
) -> None:
    flaky = make_dead(org, 3)
    make_dead(org, 1, event_type="test.job")  # another consumer's letter stays dead
    query = "consumer=flaky-worker"
    url = reverse("admin:eventbus_deadletter_matching", args=["reprocess"])
    confirm = ops.get(f"{url}?{query}")
    as_of = confirm.context["form"].initial["as_of"]
    response = ops.post(url, {"filters": query, "as_of": as_of, "reason": ""}, follow=True)

    assert response.redirect_chain[-1][0] == f"{CHANGELIST}?{query}"
    changelist = response.context["cl"]
    assert changelist.result_count == 0
    (spec,) = [f for f in changelist.filter_specs if f.title == "consumer"]
    chosen = [c["display"] for c in spec.choices(changelist) if c["selected"]]
    assert chosen == ["flaky-worker (none now)"]  # still shown, still chosen
    assert BROKEN in {value for value, _ in spec.lookup_choices}
    html = response.content.decode()
    empty = re.search(r'id="dlq-empty">(.*?)</div>', html, re.S)
    assert empty and "consumer" in empty.group(1) and "flaky-worker" in empty.group(1)
    assert "Reprocessed 3 of 3 dead letter(s). They are back in the queue" in html

    link = re.search(r'<a href="([^"]+)" id="acted-deliveries">', html)
    assert link
    request_id = AuditLog.objects.filter(action="delivery.reprocess").first().request_id
    assert link.group(1) == (
        f"{reverse('admin:eventbus_delivery_changelist')}?acted_in={request_id}"
    )
    acted = ops.get(link.group(1).replace("&amp;", "&"))
    assert {d.pk for d in acted.context["cl"].result_list} == {d.pk for d in flaky}
    assert {d.status for d in acted.context["cl"].result_list} == {"pending"}


def test_an_empty_dlq_without_filters_says_so(ops: Client) -> None:
    html = ops.get(CHANGELIST).content.decode()
    assert re.search(r'id="dlq-empty">\s*<p><strong>The DLQ is empty.</strong>', html)
