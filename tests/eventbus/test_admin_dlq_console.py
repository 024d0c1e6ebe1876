"""The DLQ as an on-call engineer reads it: consumers by name, root causes, filter choices from
the data, a warning before reprocessing into a disabled subscription, attempts in time order."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from core.models import AuditLog, Organization
from eventbus.admin import selectors
from eventbus.store.models import Delivery
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import make_dead, webhook_dead_letter

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:eventbus_deadletter_changelist")


@pytest.fixture
def client_ops(client: Client) -> Client:
    operator: User = staff(
        "ops", *DLQ_OPERATOR, "webhooks.view_subscription", "webhooks.change_subscription"
    )
    client.force_login(operator)
    return client


def reprocess(client: Client, delivery: Delivery, **extra: str) -> str:
    """Post the Reprocess action for one letter; the resulting page's HTML."""
    data = {"action": "reprocess_selected", "index": "0", "_selected_action": [delivery.pk]}
    return client.post(CHANGELIST, {**data, **extra}, follow=True).content.decode()


def test_a_webhook_consumer_shows_its_description_host_and_link(
    client_ops: Client, org: Organization
) -> None:
    subscription, _ = webhook_dead_letter(org, enabled=True)
    html = client_ops.get(CHANGELIST).content.decode()
    link = reverse("admin:webhooks_subscription_change", args=[subscription.pk])
    assert f'<a href="{link}">Order sync</a>' in html
    assert "hooks.example.com" in html
    assert f">{subscription.consumer}<" not in html  # not the bare webhook:<uuid>


def test_the_root_cause_is_shown_next_to_the_final_error(
    client_ops: Client, org: Organization
) -> None:
    _, dead = webhook_dead_letter(org)
    html = client_ops.get(CHANGELIST).content.decode()
    assert "SubscriptionDisabled" in html
    assert re.search(r'class="dc-root"[^>]*><b>root cause:</b> HTTP 500: upstream exploded', html)
    detail = client_ops.get(reverse("admin:eventbus_deadletter_change", args=[dead.pk]))
    assert "<h2>test.flaky to Order sync</h2>" in detail.content.decode()  # not webhook:<uuid>
    assert "Root cause" in detail.content.decode()
    assert "HTTP 500: upstream exploded" in detail.content.decode()


def test_no_root_cause_when_every_attempt_failed_the_same_way(
    client_ops: Client, org: Organization
) -> None:
    make_dead(org, 1)
    assert 'class="dc-root"' not in client_ops.get(CHANGELIST).content.decode()


def test_rows_are_compact_short_ids_with_copy_and_relative_times(
    client_ops: Client, org: Organization
) -> None:
    first, second = make_dead(org, 2)  # one batch: their ids share the time digits
    html = client_ops.get(CHANGELIST).content.decode()
    for dead in (first, second):
        event_id = str(dead.event_id)
        assert "<code><a href=" in html and f">…{event_id[-8:]}</a></code>" in html
        assert f'data-copy="{event_id}"' in html
        assert f">{event_id[:8]}</a>" not in html  # the time part, alike on every row
    assert str(first.event_id)[-8:] != str(second.event_id)[-8:]
    exact = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    assert re.search(
        rf'<time class="dc-when" datetime="[^"]+" title="{exact}">\d+ s ago</time>', html
    )


def test_event_type_choices_are_those_with_dead_letters(
    client_ops: Client, org: Organization
) -> None:
    make_dead(org, 1, event_type="test.flaky")
    changelist = client_ops.get(CHANGELIST).context["cl"]
    (spec,) = [f for f in changelist.filter_specs if f.title == "event type"]
    shown = [c["display"] for c in spec.choices(changelist)][1:]  # after "All"
    assert shown == ["test.flaky"]
    assert selectors.dead_event_type_choices() == ["test.flaky"]


def test_organization_choices_are_those_with_dead_letters(
    client_ops: Client, org: Organization, org_b: Organization
) -> None:
    make_dead(org, 1)
    changelist = client_ops.get(CHANGELIST).context["cl"]
    (spec,) = [f for f in changelist.filter_specs if f.title == "organization"]
    assert [c["display"] for c in spec.choices(changelist)][1:] == ["Acme"]  # not Beta
    assert org_b.name == "Beta"


def test_consumer_choices_are_named(client_ops: Client, org: Organization) -> None:
    webhook_dead_letter(org, enabled=True)
    changelist = client_ops.get(CHANGELIST).context["cl"]
    (spec,) = [f for f in changelist.filter_specs if f.title == "consumer"]
    assert "Order sync (hooks.example.com)" in [c["display"] for c in spec.choices(changelist)]


def test_reprocessing_into_a_disabled_subscription_warns_first(
    client_ops: Client, org: Organization
) -> None:
    _, dead = webhook_dead_letter(org)
    html = reprocess(client_ops, dead)
    assert 'id="disabled-warning"' in html and "Order sync" in html
    assert Delivery.objects.get(pk=dead.pk).status == "dead"  # nothing happened yet


def test_enable_and_reprocess_enables_audits_and_requeues(
    client_ops: Client, org: Organization
) -> None:
    subscription, dead = webhook_dead_letter(org)
    text = reprocess(client_ops, dead, disabled_choice="enable")
    assert "Enabled 1 consumer(s). Reprocessed 1 of 1" in text
    subscription.refresh_from_db()
    assert subscription.enabled
    assert Delivery.objects.get(pk=dead.pk).status == "pending"
    actions = dict(AuditLog.objects.values_list("action", "actor"))
    assert actions["webhook.subscription_enable"] == "user:ops"
    assert actions["delivery.reprocess"] == "user:ops"


def test_without_the_right_to_change_subscriptions_enabling_is_not_offered(
    client: Client, org: Organization
) -> None:
    client.force_login(staff("support", *DLQ_OPERATOR))
    subscription, dead = webhook_dead_letter(org)
    html = reprocess(client, dead)
    assert 'id="disabled-warning"' in html and 'id="enable-and-reprocess"' not in html
    reprocess(client, dead, disabled_choice="enable")  # posted anyway: not enabled
    subscription.refresh_from_db()
    assert not subscription.enabled
    assert not AuditLog.objects.filter(action="webhook.subscription_enable").exists()


def test_reprocess_anyway_leaves_the_subscription_disabled(
    client_ops: Client, org: Organization
) -> None:
    subscription, dead = webhook_dead_letter(org)
    reprocess(client_ops, dead, disabled_choice="keep")
    subscription.refresh_from_db()
    assert not subscription.enabled
    assert Delivery.objects.get(pk=dead.pk).status == "pending"


def test_an_enabled_subscription_is_reprocessed_without_a_warning(
    client_ops: Client, org: Organization
) -> None:
    _, dead = webhook_dead_letter(org, enabled=True)
    assert "Reprocessed 1 of 1" in reprocess(client_ops, dead)


def test_all_matching_warns_and_can_enable(client_ops: Client, org: Organization) -> None:
    subscription, dead = webhook_dead_letter(org)
    url = reverse("admin:eventbus_deadletter_matching", args=["reprocess"])
    confirmation = client_ops.get(url)
    assert 'id="disabled-warning"' in confirmation.content.decode()
    assert f'<td title="{subscription.consumer}">Order sync</td>' in confirmation.content.decode()
    form = confirmation.context["form"]
    data = {"filters": "", "as_of": form.initial["as_of"], "reason": "", "enable_disabled": "on"}
    client_ops.post(url, data)
    subscription.refresh_from_db()
    assert subscription.enabled
    assert Delivery.objects.get(pk=dead.pk).status == "pending"


def test_attempt_history_is_in_time_order_after_a_reprocess(
    client_ops: Client, org: Organization
) -> None:
    _, dead = webhook_dead_letter(org, enabled=True)
    # A second run after a reprocess: attempt 1 again, later than the first run's 1..3.
    last = dead.attempt_log.order_by("-created_at")[0].created_at
    dead.attempt_log.create(
        attempt=1,
        outcome="dead",
        error_class="HTTPStatus",
        error="HTTP 502: second run",
        created_at=last + dt.timedelta(minutes=1),
    )
    page = client_ops.get(reverse("admin:eventbus_deadletter_change", args=[dead.pk]))
    attempts = page.context["attempts"]
    assert [a.attempt for a in attempts] == [1, 2, 3, 1]
    times = [a.created_at for a in attempts]
    assert times == sorted(times)


def test_the_detail_page_shows_times_in_one_format(client_ops: Client, org: Organization) -> None:
    _, dead = webhook_dead_letter(org)
    page = client_ops.get(reverse("admin:eventbus_deadletter_change", args=[dead.pk]))
    html = page.content.decode()
    stamps = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?", html)
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", s) for s in stamps)
    assert not re.search(r"\b(a\.m\.|p\.m\.)", html)
