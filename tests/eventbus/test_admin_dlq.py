"""The DLQ screen: filters, search, Reprocess and Discard on the selection and on all matching."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator

import pytest
import time_machine
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

import eventbus
from core.models import AuditLog, Organization
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from tests.support.admin import DLQ_OPERATOR, staff
from tests.support.dlq import BROKEN, broken_consumer, drain, make_dead

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:eventbus_deadletter_changelist")
T0 = dt.datetime(2026, 11, 2, 12, 0, tzinfo=dt.UTC)


def matching_url(action: str) -> str:
    return reverse("admin:eventbus_deadletter_matching", args=[action])


@pytest.fixture
def operator() -> User:
    return staff("ops", *DLQ_OPERATOR)


@pytest.fixture
def client_ops(client: Client, operator: User) -> Client:
    client.force_login(operator)
    return client


@pytest.fixture
def broken() -> Iterator[None]:
    with broken_consumer():
        yield


def listed(client: Client, query: str = "") -> set[int]:
    response = client.get(f"{CHANGELIST}?{query}")
    assert response.status_code == 200, response.content[:500]
    return {d.pk for d in response.context["cl"].result_list}


def period_query(client: Client, title: str, choice: str) -> str:
    """The query string of a period filter's choice, as the page links it."""
    changelist = client.get(CHANGELIST).context["cl"]
    (spec,) = [f for f in changelist.filter_specs if f.title == title]
    (link,) = [c["query_string"] for c in spec.choices(changelist) if c["display"] == choice]
    return str(link).lstrip("?")


def test_lists_dead_deliveries_only_with_their_columns(
    client_ops: Client, org: Organization
) -> None:
    dead = make_dead(org, 2)
    response = client_ops.get(CHANGELIST)
    assert response.status_code == 200
    assert {d.pk for d in response.context["cl"].result_list} == {d.pk for d in dead}
    html = response.content.decode()
    for text in ("test.flaky", "flaky-worker", "Acme", "1 / 1", "RuntimeError: flaky-worker"):
        assert text in html


def test_a_done_delivery_of_the_same_event_type_is_not_listed(
    client_ops: Client, org: Organization, broken: None
) -> None:
    (dead,) = make_dead(org, 1, event_type="test.job")
    Delivery.objects.create(
        event_id=dead.event_id,
        organization=org,
        consumer="other-worker",
        event_type="test.job",
        status="done",
        next_attempt_at=T0,
        created_at=T0,
        updated_at=T0,
        finished_at=T0,
    )
    assert listed(client_ops) == {dead.pk}


def test_filters_event_type_consumer_error_class_entity_kind_organization(
    client_ops: Client, org: Organization, org_b: Organization, broken: None
) -> None:
    flaky = make_dead(org, 2, entity_kind="contact")
    job = make_dead(org, 1, event_type="test.job", entity_kind="lead")
    other_org = make_dead(org_b, 1, entity_kind="lead")
    ids = lambda rows: {d.pk for d in rows}  # noqa: E731
    assert listed(client_ops, "event_type=test.job") == ids(job)
    assert listed(client_ops, f"consumer={BROKEN}") == ids(job)
    assert listed(client_ops, "error_class=PermanentError") == ids(job)
    assert listed(client_ops, "error_class=RuntimeError") == ids(flaky + other_org)
    assert listed(client_ops, "entity_kind=lead") == ids(job + other_org)
    assert listed(client_ops, f"organization={org_b.pk}") == ids(other_org)
    assert listed(client_ops, f"organization={org.pk}&entity_kind=contact") == ids(flaky)


def test_filter_choices_come_from_the_data(client_ops: Client, org: Organization) -> None:
    make_dead(org, 1, entity_kind="contact")
    html = client_ops.get(CHANGELIST).content.decode()
    for choice in ("?consumer=flaky-worker", "?error_class=RuntimeError", "?entity_kind=contact"):
        assert choice in html
    assert f"?organization={org.pk}" in html


def test_period_filters_on_created_and_died(client_ops: Client, org: Organization) -> None:
    with time_machine.travel(T0 - dt.timedelta(days=40), tick=False):
        old = make_dead(org, 1)
    with time_machine.travel(T0 - dt.timedelta(days=10), tick=False):
        (slow_id,) = eventbus.emit_many(
            [{"event_type": "test.flaky", "entity_kind": "t", "payload": {"n": 1}}],
            organization=org,
        )
        Delivery.objects.filter(event_id=slow_id).update(max_attempts=1, next_attempt_at=T0)
    with time_machine.travel(T0, tick=False):
        drain(["flaky-worker"])  # created 10 days ago, died now
        slow = Delivery.objects.get(event_id=slow_id)
        recent = make_dead(org, 1)
        died = listed(client_ops, period_query(client_ops, "died", "Past 7 days"))
        created = listed(client_ops, period_query(client_ops, "created", "Past 7 days"))
        html = client_ops.get(CHANGELIST).content.decode()
    assert died == {slow.pk, recent[0].pk}
    assert created == {recent[0].pk}
    assert old[0].pk not in died | created
    assert "By created" in html and "By died" in html


def test_search_by_event_id_entity_id_and_request_id(client_ops: Client, org: Organization) -> None:
    entity = uuid.uuid4()
    by_entity = make_dead(org, 1, entity_id=entity)
    by_request = make_dead(org, 2, request_id="req-search-1")
    others = make_dead(org, 2)
    assert listed(client_ops, f"q={entity}") == {by_entity[0].pk}
    assert listed(client_ops, "q=req-search-1") == {d.pk for d in by_request}
    assert listed(client_ops, f"q={others[0].event_id}") == {others[0].pk}
    assert listed(client_ops, "q=nothing-matches") == set()


def test_reprocess_selected_moves_them_back_and_audits(
    client_ops: Client, org: Organization
) -> None:
    dead = make_dead(org, 3)
    chosen = dead[:2]
    response = client_ops.post(
        CHANGELIST,
        {"action": "reprocess_selected", "index": 0, "_selected_action": [d.pk for d in chosen]},
    )
    assert response.status_code == 302
    assert "Reprocessed 2 of 2 dead letter(s)." in client_ops.get(CHANGELIST).content.decode()
    for delivery in chosen:
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_error) == ("pending", 0, None)
    assert Delivery.objects.get(pk=dead[2].pk).status == "dead"
    entries = AuditLog.objects.filter(action="delivery.reprocess")
    assert {e.target_id for e in entries} == {str(d.pk) for d in chosen}
    assert {e.actor for e in entries} == {"user:ops"}
    # The admin request's own id (middleware) is on the audit rows: the correlation view finds them.
    assert {e.request_id for e in entries} == {response["X-Request-ID"]}


def test_discard_selected_asks_for_a_reason_first(client_ops: Client, org: Organization) -> None:
    dead = make_dead(org, 2)
    form = {"action": "discard_selected", "_selected_action": [d.pk for d in dead]}
    page = client_ops.post(CHANGELIST, {**form, "index": 0})
    assert page.status_code == 200
    assert "Discard <strong>2</strong> dead letters?" in page.content.decode()
    blank = client_ops.post(CHANGELIST, {**form, "post": "yes", "reason": "   "})
    assert blank.status_code == 200
    assert "This field is required." in blank.content.decode()
    assert Delivery.objects.filter(status="dead").count() == 2
    assert not AuditLog.objects.exists()

    done = client_ops.post(CHANGELIST, {**form, "post": "yes", "reason": "customer deleted"})
    assert done.status_code == 302
    assert set(Delivery.objects.values_list("status", flat=True)) == {"discarded"}
    entries = AuditLog.objects.filter(action="delivery.discard")
    assert entries.count() == 2
    assert {(e.actor, e.reason) for e in entries} == {("user:ops", "customer deleted")}
    assert {e.request_id for e in entries} == {done["X-Request-ID"]}


def test_counts_report_what_was_no_longer_dead(client_ops: Client, org: Organization) -> None:
    dead = make_dead(org, 2)
    Delivery.objects.filter(pk=dead[0].pk).update(status="pending")  # someone else got there
    response = client_ops.post(
        CHANGELIST,
        {"action": "reprocess_selected", "index": 0, "_selected_action": [d.pk for d in dead]},
        follow=True,
    )
    assert "Reprocessed 1 of 1 dead letter(s)." in response.content.decode()


def test_reprocess_all_matching_acts_beyond_the_visible_page(
    client_ops: Client, org: Organization, org_b: Organization
) -> None:
    mine = make_dead(org, 60)  # more than one page (50 per page)
    theirs = make_dead(org_b, 3)
    query = f"organization={org.pk}"
    page = client_ops.get(f"{CHANGELIST}?{query}")
    assert len(page.context["cl"].result_list) == 50
    assert f"{matching_url('reprocess')}?{query}" in page.content.decode()

    confirm = client_ops.get(f"{matching_url('reprocess')}?{query}")
    assert confirm.status_code == 200
    html = confirm.content.decode()
    assert '<strong id="matching-count">60</strong>' in html
    assert "Acme" in html  # the organization filter is described
    assert Delivery.objects.filter(status="dead").count() == 63  # nothing changed yet

    form = confirm.context["form"]
    response = client_ops.post(
        matching_url("reprocess"),
        {"filters": query, "as_of": form.initial["as_of"], "reason": ""},
    )
    assert response.status_code == 302
    assert response["Location"] == f"{CHANGELIST}?{query}"
    assert not Delivery.objects.filter(pk__in=[d.pk for d in mine], status="dead").exists()
    assert Delivery.objects.filter(pk__in=[d.pk for d in theirs], status="dead").count() == 3
    assert AuditLog.objects.filter(action="delivery.reprocess").count() == 60


def test_discard_all_matching_needs_a_reason_and_respects_search(
    client_ops: Client, org: Organization
) -> None:
    hit = make_dead(org, 2, request_id="req-bulk-7")
    miss = make_dead(org, 2)
    confirm = client_ops.get(f"{matching_url('discard')}?q=req-bulk-7")
    as_of = confirm.context["form"].initial["as_of"]
    assert '<strong id="matching-count">2</strong>' in confirm.content.decode()
    missing = client_ops.post(matching_url("discard"), {"filters": "q=req-bulk-7", "as_of": as_of})
    assert missing.status_code == 200
    assert "This field is required." in missing.content.decode()
    assert Delivery.objects.filter(status="dead").count() == 4

    client_ops.post(
        matching_url("discard"),
        {"filters": "q=req-bulk-7", "as_of": as_of, "reason": "test data"},
    )
    assert set(
        Delivery.objects.filter(pk__in=[d.pk for d in hit]).values_list("status", flat=True)
    ) == {"discarded"}
    assert set(
        Delivery.objects.filter(pk__in=[d.pk for d in miss]).values_list("status", flat=True)
    ) == {"dead"}
    assert set(AuditLog.objects.values_list("reason", flat=True)) == {"test data"}


def test_all_matching_leaves_letters_that_died_after_the_confirmation(
    client_ops: Client, org: Organization
) -> None:
    with time_machine.travel(T0, tick=False):
        before = make_dead(org, 1)
        as_of = client_ops.get(matching_url("reprocess")).context["form"].initial["as_of"]
    with time_machine.travel(T0 + dt.timedelta(minutes=5), tick=False):
        after = make_dead(org, 1)
        client_ops.post(matching_url("reprocess"), {"filters": "", "as_of": as_of})
    assert Delivery.objects.get(pk=before[0].pk).status == "pending"
    assert Delivery.objects.get(pk=after[0].pk).status == "dead"


def test_bad_filter_values_and_lookups_are_clear_errors(
    client_ops: Client, org: Organization
) -> None:
    make_dead(org, 1)
    bad_org = client_ops.get(f"{CHANGELIST}?organization=not-a-uuid")
    assert bad_org.status_code == 302 and "e=1" in bad_org["Location"]
    # A lookup no filter declares (it would scan the table) is refused, not run.
    assert client_ops.get(f"{CHANGELIST}?last_error__icontains=x").status_code == 400
    refused = client_ops.get(f"{matching_url('reprocess')}?organization=not-a-uuid")
    assert refused.status_code == 302
    assert client_ops.get(matching_url("explode")).status_code == 404
    expired = client_ops.post(matching_url("reprocess"), {"filters": "", "as_of": "yesterday"})
    assert expired.status_code == 200 and "expired" in expired.content.decode()
    assert Delivery.objects.filter(status="dead").count() == 1


def test_staff_without_the_custom_permissions_cannot_act(client: Client, org: Organization) -> None:
    dead = make_dead(org, 1)
    viewer = staff("viewer", "eventbus.view_deadletter")
    client.force_login(viewer)
    page = client.get(CHANGELIST)
    assert page.status_code == 200
    assert "reprocess_selected" not in page.content.decode()
    assert "Reprocess all matching" not in page.content.decode()
    posted = client.post(
        CHANGELIST,
        {"action": "reprocess_selected", "index": 0, "_selected_action": [dead[0].pk]},
    )
    assert posted.status_code == 200  # "No action selected": the action is not offered
    assert client.get(matching_url("reprocess")).status_code == 403
    assert (
        client.post(
            matching_url("discard"), {"filters": "", "as_of": "x", "reason": "r"}
        ).status_code
        == 403
    )
    assert Delivery.objects.get(pk=dead[0].pk).status == "dead"
    assert not AuditLog.objects.exists()


def test_reprocess_permission_alone_does_not_allow_discard(
    client: Client, org: Organization
) -> None:
    dead = make_dead(org, 1)
    client.force_login(staff("half", "eventbus.view_deadletter", "eventbus.reprocess_deadletter"))
    html = client.get(CHANGELIST).content.decode()
    assert "reprocess_selected" in html and "discard_selected" not in html
    assert client.get(matching_url("discard")).status_code == 403
    client.post(
        CHANGELIST,
        {
            "action": "discard_selected",
            "_selected_action": [dead[0].pk],
            "post": "yes",
            "reason": "r",
        },
    )
    assert Delivery.objects.get(pk=dead[0].pk).status == "dead"


def test_staff_without_view_permission_sees_nothing(client: Client, org: Organization) -> None:
    make_dead(org, 1)
    client.force_login(staff("nobody"))
    assert client.get(CHANGELIST).status_code == 403


def test_detail_shows_error_attempts_and_escaped_payload(
    client_ops: Client, org: Organization
) -> None:
    (dead,) = make_dead(org, 1, payload={"note": "<script>alert('x')</script>"})
    assert DeliveryAttempt.objects.filter(delivery=dead).count() == 1
    response = client_ops.get(reverse("admin:eventbus_deadletter_change", args=[dead.pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert "Attempt history" in html and "RuntimeError" in html
    assert reverse("admin:eventbus_eventlog_change", args=[dead.event_id]) in html
    assert 'id="reprocess-one"' in html and 'id="discard-one"' in html


def test_the_dlq_is_linked_from_the_admin_index(client_ops: Client) -> None:
    html = client_ops.get(reverse("admin:index")).content.decode()
    assert CHANGELIST in html
    assert reverse("eventbus_ops:status") not in html  # needs view_delivery, which ops lacks
    assert EventLog.objects.count() == 0
