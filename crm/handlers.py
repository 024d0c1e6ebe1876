"""The CRM's consumers, seed 000 §3 (discovered at start-up). Each acts inside its delivery's
organization: the drain scopes its connection to it (row-level security) and every id taken
from a payload is checked with `eventbus.store.tenancy.guard_payload` (another tenant's id is
refused and audited), then looked up within `event.organization_id`.

- `notification-worker` (lead.assigned, ai.handoff_triggered, conversation.sla_breached): a
  handed-off conversation is routed to an agent (crm.conversations.handoff_assign), then the
  agent is told: an admin notification and an e-mail, once per event (atomic: the notification
  row commits with the ack).
- `sla-tracker-worker` (conversation.opened, conversation.resolved, conversation.reopened):
  the conversation's deadlines (ConversationSla); the `sla-breaches` job finds the missed ones.
- `csat-trigger-worker` (conversation.resolved, nuvemshop.order_fulfilled): the CSAT question,
  inside the 24-hour window only.
- `template-suggester-worker` (system.window_24h_expired): a template suggestion for the agent.
- `analytics-aggregator-worker`: daily per-organization counters (crm.analytics), a batch
  consumer: up to 200 events of one organization counted in one statement.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db.models import F

import eventbus
from crm import analytics, notifications, sla
from crm.conf import crm_settings
from crm.conversation_models import CsatRequest, TemplateSuggestion
from crm.conversations import conversation_of, suggest_template, window_open
from crm.models import Conversation, Order
from crm.services import send_message
from eventbus.store.tenancy import guard_payload

CONVERSATION = {"conversation_id": Conversation}


@eventbus.consumer(
    "notification-worker",
    events=["lead.assigned", "ai.handoff_triggered", "conversation.sla_breached"],
    max_attempts=5,
    atomic=True,
)
def notification(event: eventbus.Event) -> None:
    """Route a handoff to an agent; tell the agent (admin list + e-mail) once per event."""
    guard_payload(event, CONVERSATION)
    notifications.handle(event)


@eventbus.consumer(
    "sla-tracker-worker",
    events=["conversation.opened", "conversation.resolved", "conversation.reopened"],
    max_attempts=5,
    atomic=True,
)
def sla_tracker(event: eventbus.Event) -> None:
    """Start, stop or restart a conversation's SLA clocks."""
    guard_payload(event, CONVERSATION)
    sla.track(event)


@eventbus.consumer(
    "csat-trigger-worker",
    events=["conversation.resolved", "nuvemshop.order_fulfilled"],
    max_attempts=5,
    atomic=True,
)
def csat_trigger(event: eventbus.Event) -> None:
    """Ask the contact for a CSAT score, within the 24-hour window only (never a template)."""
    guard_payload(event, {**CONVERSATION, "order_id": Order})
    conversation = _csat_conversation(event)
    question = crm_settings.CSAT_QUESTION.strip()
    if conversation is None or not question:
        return
    if CsatRequest.objects.filter(source_event_id=event.id).exists():
        return  # a redelivery: asked (or skipped) already
    request = CsatRequest(
        organization_id=event.organization_id,
        conversation=conversation,
        cause=event.event_type,
        source_event_id=event.id,
    )
    if conversation.contact.blocked_at is not None:
        request.skipped = "contact_blocked"
    elif not window_open(conversation):
        request.skipped = "window_closed"
    else:
        request.message = send_message(conversation=conversation, body=question, sender="system")
    request.save()


def _csat_conversation(event: eventbus.Event) -> Conversation | None:
    """The conversation to ask in: the resolved one, or the fulfilled order's contact's latest."""
    if event.event_type == "conversation.resolved":
        return conversation_of(event)
    order_id = event.payload.get("order_id")
    try:
        order = (
            Order.objects.filter(organization_id=event.organization_id, pk=str(order_id)).first()
            if order_id
            else None
        )
    except (ValueError, ValidationError):
        return None
    if order is None or order.contact_id is None:
        return None
    return (
        Conversation.objects.filter(
            organization_id=event.organization_id, contact_id=order.contact_id
        )
        .select_related("contact")
        .order_by(F("last_inbound_at").desc(nulls_last=True))
        .first()
    )


@eventbus.consumer(
    "template-suggester-worker", events=["system.window_24h_expired"], max_attempts=5
)
def template_suggester(event: eventbus.Event) -> None:
    """The window closed: suggest the re-engagement template to the conversation's agent."""
    guard_payload(event, CONVERSATION)
    conversation = conversation_of(event)
    if conversation is not None:
        suggest_template(
            conversation=conversation,
            reason=TemplateSuggestion.Reason.WINDOW_EXPIRED,
            source_event_id=event.id,
        )


@eventbus.consumer(
    "analytics-aggregator-worker", events=list(analytics.METRICS), max_attempts=8, batch=200
)
def analytics_aggregator(events: list[eventbus.Event]) -> None:
    """Count each event once in its organization's daily counters, the batch in one statement
    committed with its ack."""
    analytics.count_many(events)
