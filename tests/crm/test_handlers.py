"""The CRM's consumers: a handoff reaches an agent (assigned, e-mailed, listed in the admin);
the aggregator counts an event once under redelivery; CSAT only inside the window; the template
suggester; SLA breaches detected with a controlled clock."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.core import mail
from django.utils import timezone

import eventbus
from core.models import Organization
from crm import analytics, sla
from crm.conversation_models import (
    AgentNotification,
    AnalyticsDaily,
    ConversationSla,
    CsatRequest,
    TemplateSuggestion,
)
from crm.conversations import resolve
from crm.models import Conversation, Message
from tests.crm.support import agent, as_event, emit_about, events, run
from tests.support.factories import ConversationFactory

pytestmark = pytest.mark.django_db(transaction=True)


def handoff(conversation: Conversation) -> None:
    from ai.handoff import handoff_trigger

    handoff_trigger(conversation=conversation, reason="human_requested")


def test_a_handoff_reaches_an_agent_and_can_be_resumed(org: Organization) -> None:
    from crm.conversations import resume_bot

    ana = agent(org, "ana", "ana@example.test")
    conversation = ConversationFactory(organization=org)
    handoff(conversation)
    run("notification-worker")
    conversation.refresh_from_db()
    assert conversation.assigned_to_id == ana.pk and not conversation.bot_active
    (assigned,) = events("conversation.assigned")
    assert assigned.payload["mode"] == "round_robin"
    (email,) = mail.outbox
    assert email.to == ["ana@example.test"] and "needs a person" in email.subject
    (note,) = AgentNotification.objects.all()
    assert (note.kind, note.recipient_id, note.target_id) == (
        "handoff",
        ana.pk,
        str(conversation.pk),
    )
    run("notification-worker")  # nothing more to do: one e-mail, one notification
    assert len(mail.outbox) == 1
    assert resume_bot(conversation=conversation, actor="user:ana")
    assert Conversation.objects.get(pk=conversation.pk).bot_active


def test_the_aggregator_counts_an_event_once_under_redelivery(
    org: Organization, org_b: Organization
) -> None:
    conversation = ConversationFactory(organization=org)
    row = eventbus.emit(
        "message.delivered",
        organization=org,
        entity_kind="message",
        entity_id=None,
        payload={"message_id": "m", "delivered_at": timezone.now().isoformat()},
    )
    event = as_event(row, "analytics-aggregator-worker")
    assert analytics.count(event)
    assert not analytics.count(event)  # the same event again: a redelivery
    (counter,) = AnalyticsDaily.objects.filter(organization=org)
    assert (counter.metric, counter.count) == ("message.delivered", 1)
    assert not AnalyticsDaily.objects.filter(organization=org_b).exists()
    assert conversation  # the organization's tenant is the event's


def test_csat_is_asked_inside_the_window_only(org: Organization) -> None:
    inside = ConversationFactory(organization=org, last_inbound_at=timezone.now())
    outside = ConversationFactory(
        organization=org, last_inbound_at=timezone.now() - dt.timedelta(hours=30)
    )
    resolve(conversation=inside, actor="user:ana")
    resolve(conversation=outside, actor="user:ana")
    run("csat-trigger-worker")
    asked = CsatRequest.objects.get(conversation=inside)
    assert asked.message is not None and asked.message.status == Message.Status.QUEUED
    skipped = CsatRequest.objects.get(conversation=outside)
    assert (skipped.message, skipped.skipped) == (None, "window_closed")
    assert not Message.objects.filter(conversation=outside).exists()


def test_an_expired_window_suggests_a_template(org: Organization) -> None:
    conversation = ConversationFactory(organization=org)
    emit_about(
        "system.window_24h_expired",
        conversation,
        organization=org,
        expired_at=timezone.now().isoformat(),
    )
    run("template-suggester-worker")
    (suggestion,) = TemplateSuggestion.objects.all()
    assert (suggestion.conversation_id, suggestion.reason) == (conversation.pk, "window_expired")


def test_sla_breaches_are_detected_emitted_and_alerted(org: Organization, settings: object) -> None:
    start = timezone.now()
    with time_machine.travel(start, tick=False) as clock:
        late, answered = (
            ConversationFactory(organization=org),
            ConversationFactory(organization=org),
        )
        for conversation in (late, answered):
            emit_about("conversation.opened", conversation, organization=org, channel="whatsapp")
        run("sla-tracker-worker")
        assert ConversationSla.objects.count() == 2
        clock.shift(dt.timedelta(minutes=5))
        Message.objects.create(
            organization=org, conversation=answered, direction="outbound", sender="agent", body="oi"
        )
        assert sla.check_breaches() == 0
        clock.shift(dt.timedelta(minutes=11))  # past the 15-minute first-response deadline
        assert sla.check_breaches() == 1
        assert sla.check_breaches() == 0  # once
        (breach,) = events("conversation.sla_breached")
        assert breach.payload["conversation_id"] == str(late.pk)
        assert breach.payload["kind"] == "first_response"
        assert ConversationSla.objects.get(pk=answered.pk).first_response_at is not None
        settings.ADMINS = [("ops", "ops@example.test")]  # type: ignore[attr-defined]
        run("notification-worker")
    assert AgentNotification.objects.filter(kind="sla_breach").count() == 1
    assert [m.subject for m in mail.outbox if "SLA" in m.subject] == [
        "[Deskcomm] Conversation SLA breached"
    ]  # the alert (core.alerts) mailed to ADMINS


def test_a_fulfilled_order_asks_the_contacts_conversation_once(org: Organization) -> None:
    from tests.support.factories import OrderFactory

    order = OrderFactory(organization=org)
    conversation = ConversationFactory(
        organization=org, contact=order.contact, last_inbound_at=timezone.now()
    )
    for _ in range(2):  # the same fact twice (idempotency key): one event, one question
        eventbus.emit(
            "nuvemshop.order_fulfilled",
            organization=org,
            entity_kind="order",
            entity_id=order.pk,
            payload={"order_id": str(order.pk), "fulfilled_at": timezone.now().isoformat()},
            idempotency_key=f"nuvemshop.order_fulfilled:{order.pk}",
        )
    run("csat-trigger-worker")
    (asked,) = CsatRequest.objects.all()
    assert (asked.conversation_id, asked.cause) == (conversation.pk, "nuvemshop.order_fulfilled")
    assert Message.objects.filter(conversation=conversation, sender="system").count() == 1


def test_a_lead_assigned_to_an_agent_notifies_them(org: Organization, org_b: Organization) -> None:
    import uuid

    from crm import services

    ana = agent(org, "ana", "ana@example.test")
    bruno = agent(org_b, "bruno", "bruno@example.test")
    lead = services.lead_create(organization=org, name="Loja da Ana")
    services.lead_assign(lead, owner_id=ana.pk)  # the trigger emits lead.assigned
    # Claims the lead rows do not back (the type is open to integrators): a lead org does not
    # have, and another organization's agent. Nobody is told.
    for owner, lead_id in ((ana, uuid.uuid4()), (bruno, lead.pk)):
        eventbus.emit(
            "lead.assigned",
            organization=org,
            entity_kind="lead",
            entity_id=lead_id,
            payload={"to_owner_id": owner.pk},
        )
    run("notification-worker")
    notes = AgentNotification.objects.order_by("id")
    assert [(n.recipient_id, n.target_id) for n in notes] == [(ana.pk, str(lead.pk))]
    assert [m.to for m in mail.outbox] == [["ana@example.test"]]


def test_a_handoff_naming_another_tenants_conversation_is_refused(
    org: Organization, org_b: Organization
) -> None:
    from core.models import AuditLog
    from eventbus.store.models import Delivery

    agent(org, "ana")
    theirs = ConversationFactory(organization=org_b)
    emit_about(
        "ai.handoff_triggered",
        theirs,
        organization=org,
        reason="human_requested",
        **{"from": "bot"},
    )
    run("notification-worker")
    assert Delivery.objects.get(consumer="notification-worker").status == "dead"
    theirs.refresh_from_db()
    assert theirs.assigned_to_id is None
    assert not AgentNotification.objects.exists() and mail.outbox == []
    assert AuditLog.objects.filter(action="security.cross_tenant_refused").count() == 1


def test_the_aggregator_counts_a_batch_once_each_with_redelivered_events_in_it(
    org: Organization, org_b: Organization
) -> None:
    from eventbus.store.registry import registry

    assert registry.get("analytics-aggregator-worker").batch  # a batch consumer
    delivered = {"message_id": "m", "delivered_at": timezone.now().isoformat()}
    rows = [
        eventbus.emit("message.delivered", organization=tenant, entity_kind="message",
                      payload=delivered)
        for tenant in (org, org, org, org, org, org_b, org_b)
    ]  # fmt: skip
    # A worker counted two of them and died before its ack: they come back, counted already.
    assert analytics.count_many([as_event(r, "analytics-aggregator-worker") for r in rows[:2]]) == 2
    run("analytics-aggregator-worker")
    counts = {
        c.organization_id: c.count
        for c in AnalyticsDaily.objects.filter(metric="message.delivered")
    }
    assert counts == {org.pk: 5, org_b.pk: 2}
    run("analytics-aggregator-worker")  # nothing left to count
    assert AnalyticsDaily.objects.get(organization=org, metric="message.delivered").count == 5
