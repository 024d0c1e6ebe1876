"""Deliveries waiting to retry: their own filter (and discarded ones'), Retry now on the checked
rows and on the delivery's page (audited, tenant-scoped, only for those waiting), and the
redelivered flag only where it is set (issue 44, item 10)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import eventbus
from core.models import AuditLog, Organization
from eventbus.operations import services
from eventbus.store.models import Delivery
from tests.support.admin import staff
from tests.support.dlq import drain, make_dead, make_retrying

pytestmark = pytest.mark.django_db

DELIVERIES = reverse("admin:eventbus_delivery_changelist")
RETRIER = ("eventbus.view_delivery", "eventbus.retry_delivery")
T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def ops(client: Client) -> Client:
    user: User = staff("ops", *RETRIER)
    client.force_login(user)
    return client


def listed(client: Client, query: str = "") -> set[int]:
    response = client.get(f"{DELIVERIES}?{query}")
    assert response.status_code == 200, response.content[:300]
    return {d.pk for d in response.context["cl"].result_list}


def retry_now(client: Client, *deliveries: Delivery, **extra: str) -> object:
    data = {
        "action": "retry_now_selected",
        "index": "0",
        "_selected_action": [d.pk for d in deliveries],
        **extra,
    }
    return client.post(DELIVERIES, data)


def test_retrying_and_discarded_have_their_own_filters(ops: Client, org: Organization) -> None:
    retrying = make_retrying(org, 2)
    dead, kept = make_dead(org, 2)
    services.deliveries_discard(delivery_ids=[dead.pk], actor="user:ops", reason="test data")
    fresh = eventbus.emit("test.effect", organization=org, entity_kind="thing", payload={"n": 1})
    never_failed = set(Delivery.objects.filter(event_id=fresh.pk).values_list("pk", flat=True))
    assert listed(ops, "status=retrying") == {d.pk for d in retrying}
    badges = re.findall(
        r'<td class="field-status_shown">(.*?)</td>', ops.get(DELIVERIES).content.decode()
    )
    assert badges.count('<span class="dc-badge dc-retrying">retrying</span>') == 2
    assert listed(ops, "status=discarded") == {dead.pk}
    assert listed(ops, "status=pending") == {d.pk for d in retrying} | never_failed
    assert listed(ops, "status=dead") == {kept.pk}
    refused = ops.get(f"{DELIVERIES}?status=bogus")
    assert refused.status_code == 302 and refused["Location"].endswith("?e=1")


def test_retry_now_makes_only_waiting_deliveries_due_and_audits_them(
    ops: Client, org: Organization
) -> None:
    with time_machine.travel(T0, tick=False):
        waiting = make_retrying(org, 2)
        (dead,) = make_dead(org, 1)
    assert all(d.next_attempt_at > T0 + dt.timedelta(seconds=29) for d in waiting)
    now = T0 + dt.timedelta(seconds=5)
    with time_machine.travel(now, tick=False):
        response = retry_now(ops, *waiting, dead)
        assert response.status_code == 302  # type: ignore[attr-defined]
        page = ops.get(DELIVERIES).content.decode()
        assert "Retried 2 of 3 deliveries now" in page
        assert "1 were not waiting to retry" in page
        for before in waiting:
            after = Delivery.objects.get(pk=before.pk)
            assert (after.status, after.next_attempt_at) == ("pending", now)
            assert (after.attempts, after.last_error) == (before.attempts, before.last_error)
        assert Delivery.objects.get(pk=dead.pk).status == "dead"
        rows = AuditLog.objects.filter(action="delivery.retry_now")
        assert {(r.actor, int(r.target_id), r.organization_id) for r in rows} == {
            ("user:ops", d.pk, org.pk) for d in waiting
        }
        assert drain(["flaky-worker"]) == 2  # due: the workers take them at once
    assert {d.attempts for d in Delivery.objects.filter(pk__in=[d.pk for d in waiting])} == {2}


def test_retry_now_from_the_delivery_page(ops: Client, org: Organization) -> None:
    (waiting,) = make_retrying(org, 1)
    (dead,) = make_dead(org, 1)
    page = reverse("admin:eventbus_delivery_change", args=[waiting.pk])
    assert 'id="retry-now"' in ops.get(page).content.decode()
    dead_page = reverse("admin:eventbus_delivery_change", args=[dead.pk])
    assert 'id="retry-now"' not in ops.get(dead_page).content.decode()

    response = retry_now(ops, waiting, from_detail="1")
    assert response["Location"] == page  # type: ignore[index]
    after = ops.get(page).content.decode()
    assert "Retried 1 of 1 deliveries now" in after
    assert 'id="retry-now"' not in after  # due now: nothing left to bring forward


def test_retry_now_needs_its_permission(client: Client, org: Organization) -> None:
    (waiting,) = make_retrying(org, 1)
    client.force_login(staff("viewer", "eventbus.view_delivery"))
    page = reverse("admin:eventbus_delivery_change", args=[waiting.pk])
    assert 'id="retry-now"' not in client.get(page).content.decode()
    retry_now(client, waiting)
    assert Delivery.objects.get(pk=waiting.pk).next_attempt_at == waiting.next_attempt_at
    assert not AuditLog.objects.filter(action="delivery.retry_now").exists()


def test_retry_now_is_tenant_scoped(client: Client, org: Organization, org_b: Organization) -> None:
    (mine,) = make_retrying(org, 1)
    (theirs,) = make_retrying(org_b, 1)
    client.force_login(staff("scoped", *RETRIER, organizations=[org]))
    retry_now(client, mine, theirs)
    assert Delivery.objects.get(pk=theirs.pk).next_attempt_at == theirs.next_attempt_at
    assert Delivery.objects.get(pk=mine.pk).next_attempt_at < mine.next_attempt_at
    assert list(AuditLog.objects.values_list("target_id", flat=True)) == [str(mine.pk)]


def test_the_redelivered_flag_shows_only_when_set(ops: Client, org: Organization) -> None:
    plain, flagged = make_retrying(org, 2)
    Delivery.objects.filter(pk=flagged.pk).update(
        redelivered=True, redelivery_reason="worker w1 died holding it"
    )
    html = ops.get(DELIVERIES).content.decode()
    assert "icon-no.svg" not in html and "icon-yes.svg" not in html
    cells = dict(
        re.findall(
            r'<a href="/admin/eventbus/delivery/(\d+)/change/">\d+</a></th>.*?'
            r'<td class="field-redelivered_flag">(.*?)</td>',
            html,
            re.S,
        )
    )
    assert cells[str(plain.pk)] == ""
    assert cells[str(flagged.pk)] == (
        '<span class="dc-badge dc-redelivered" title="yes: worker w1 died holding it">'
        "redelivered</span>"
    )
    assert re.search(r'<td class="field-next_attempt"><time [^>]*>in \d+ s</time></td>', html)
