"""Fan-out at emit: matching enabled subscriptions get a delivery in the emit statement itself,
from `eventbus.emit`, `emit_many` and the `emit_event` SQL function (triggers) alike."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import eventbus
from core.models import Organization
from crm.models import Lead
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from tests.support.consumers import EFFECT_CONSUMERS
from tests.webhooks.conftest import Subscribe
from webhooks import services
from webhooks.conf import SENSITIVE_NAMESPACES

pytestmark = pytest.mark.django_db

URL = "https://hooks.example.com/in"


def consumers_of(event_id: object) -> set[str]:
    return set(Delivery.objects.filter(event_id=event_id).values_list("consumer", flat=True))


def lead_won(org: Organization) -> EventLog:
    return eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": "x"}
    )


def test_exact_wildcard_and_all_match_within_the_organization(
    org: Organization, org_b: Organization, subscribe: Subscribe
) -> None:
    exact, _ = subscribe(URL, ["lead.won"])
    entity, _ = subscribe(URL, ["lead.*"])
    everything, _ = subscribe(URL, ["*"])
    subscribe(URL, ["lead.lost", "contact.*"])  # no match
    subscribe(URL, ["*"], organization=org_b)  # another tenant
    disabled, _ = subscribe(URL, ["*"])
    services.subscription_disable(subscription_id=disabled.id, actor="t", reason="off")
    event = lead_won(org)
    expected = {exact.consumer, entity.consumer, everything.consumer}
    assert consumers_of(event.id) == expected
    assert event.fanout == 3
    assert EventLog.objects.get(pk=event.pk).fanout == 3


@pytest.mark.parametrize("namespace", SENSITIVE_NAMESPACES)
def test_star_does_not_match_the_sensitive_namespaces(
    org: Organization, subscribe: Subscribe, namespace: str
) -> None:
    everything, _ = subscribe(URL, ["*"])
    listed, _ = subscribe(URL, [f"{namespace}.*"])
    event_type = {"lgpd": "lgpd.redact_applied", "system": "system.send_blocked"}[namespace]
    exact, _ = subscribe(URL, [event_type, "lead.*"])
    other, _ = subscribe(URL, ["lead.*"])
    payload = {"request_id": "r", "contact_id": "c", "scope": "crm_only", "reason": "stop"}
    event = eventbus.emit(event_type, organization=org, entity_kind="contact", payload=payload)
    assert consumers_of(event.id) == {listed.consumer, exact.consumer}
    # Everything else still reaches "*" (contact.anonymized included: LGPD Art. 18 §6).
    assert consumers_of(lead_won(org).id) == {everything.consumer, exact.consumer, other.consumer}


def test_emit_stays_one_statement_with_subscriptions(
    org: Organization, subscribe: Subscribe
) -> None:
    subscribe(URL, ["*"])
    subscribe(URL, ["test.*"])
    with CaptureQueriesContext(connection) as queries:
        event = eventbus.emit(
            "test.effect", organization=org, entity_kind="thing", payload={"n": 1}
        )
    assert len(queries) == 1
    stored = EventLog.objects.get(pk=event.pk)
    assert stored.fanout == len(EFFECT_CONSUMERS) + 2 == len(consumers_of(event.id))


def test_the_event_summary_counts_webhook_deliveries(
    org: Organization, subscribe: Subscribe, side_effects: None
) -> None:
    subscribe(URL, ["test.*"])
    event = eventbus.emit("test.effect", organization=org, entity_kind="thing", payload={"n": 1})
    worker = Worker(WorkerOptions(consumers=list(EFFECT_CONSUMERS), listen=False))
    while worker.run_once():
        pass
    stored = EventLog.objects.get(pk=event.pk)
    assert stored.status == "processing"  # the bus consumers are done, the webhook is not
    assert sorted(stored.consumed_by) == sorted(EFFECT_CONSUMERS)


def test_emit_many_fans_out_per_event(org: Organization, subscribe: Subscribe) -> None:
    leads, _ = subscribe(URL, ["lead.*"])
    ids = eventbus.emit_many(
        [
            {"event_type": "lead.lost", "entity_kind": "lead",
             "payload": {"reason": "r", "lost_at": "x"}},
            {"event_type": "test.job", "entity_kind": "t", "payload": {"n": 1}},
        ],
        organization=org,
    )  # fmt: skip
    assert consumers_of(ids[0]) == {leads.consumer}
    assert consumers_of(ids[1]) == set()
    assert dict(EventLog.objects.values_list("id", "status")) == {
        ids[0]: "pending",
        ids[1]: "done",
    }
    assert EventLog.objects.get(pk=ids[0]).fanout == 1


def test_sql_triggers_fan_out_to_subscriptions(org: Organization, subscribe: Subscribe) -> None:
    subscription, _ = subscribe(URL, ["lead.stage_changed"])
    lead = Lead.objects.create(organization=org, name="Deal", stage_id="new")
    lead.stage_id = "won"
    lead.save()
    event = EventLog.objects.get(event_type="lead.stage_changed")
    assert consumers_of(event.id) == {subscription.consumer}
    assert event.fanout == 1 and event.status == "pending"


def test_a_ping_goes_to_its_subscription_only(org: Organization, subscribe: Subscribe) -> None:
    target, _ = subscribe(URL, ["*"])
    other, _ = subscribe(URL, ["*"])
    event = services.subscription_ping(subscription=target, actor="t")
    assert consumers_of(event.id) == {target.consumer}
    assert other.consumer not in consumers_of(event.id)


def test_a_rolled_back_emit_leaves_no_webhook_delivery(
    org: Organization, subscribe: Subscribe
) -> None:
    subscribe(URL, ["*"])
    with pytest.raises(RuntimeError), transaction.atomic():
        lead_won(org)
        raise RuntimeError("business failure")
    assert not Delivery.objects.exists() and not EventLog.objects.exists()
