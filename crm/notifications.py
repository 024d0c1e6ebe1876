"""notification-worker: tell an agent, in the admin and by e-mail, once per event.

- `ai.handoff_triggered`: the conversation is routed first (crm.conversations.handoff_assign:
  its assignee, the organization's owner, or its next agent in turn), then its agent is told.
  Without any agent the notification has no recipient: every admin of the organization sees it.
- `lead.assigned`: the lead's new owner (`to_owner_id`, a user id) is told.
- `conversation.sla_breached`: the conversation's assignee is told and an operational alert is
  raised (core.alerts).

The notification row is unique per (event, kind): a redelivery finds it and sends nothing again
(the consumer is atomic: the row commits with the ack). The text holds ids and reasons only.
"""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.utils import timezone

import eventbus
from core import alerts, audit
from crm.conversation_models import AgentNotification
from crm.conversations import agents_of, conversation_of, handoff_assign
from crm.models import Lead

CONSUMER = "notification-worker"
HANDOFFS_PATH = "/admin/crm/handoff/"
NOTIFICATIONS_PATH = "/admin/crm/agentnotification/"


def handle(event: eventbus.Event) -> None:
    if event.event_type == "ai.handoff_triggered":
        _handoff(event)
    elif event.event_type == "lead.assigned":
        _lead_assigned(event)
    elif event.event_type == "conversation.sla_breached":
        _sla_breached(event)


def _handoff(event: eventbus.Event) -> None:
    conversation = conversation_of(event)
    if conversation is None:
        return
    agent = handoff_assign(conversation=conversation, actor=audit.system_actor(CONSUMER))
    reason = str(event.payload.get("reason") or "")[:80]
    _notify(
        event,
        kind=AgentNotification.Kind.HANDOFF,
        recipient=agent,
        target=("conversation", str(conversation.pk)),
        text=f"Conversation {str(conversation.pk)[:8]} needs a person ({reason}).",
        link=HANDOFFS_PATH,
    )


def _lead_assigned(event: eventbus.Event) -> None:
    owner = str(event.payload.get("to_owner_id") or "")
    agent = next((a for a in agents_of(event.organization_id) if str(a.pk) == owner), None)
    lead_id = str(event.payload.get("lead_id") or event.entity_id or "")
    if agent is None or not _owns(event, lead_id, agent.pk):
        # The type is open to the integrators' door: an event is a claim, the lead row the fact.
        # Nobody is told of a lead this organization does not have with that owner.
        return
    _notify(
        event,
        kind=AgentNotification.Kind.LEAD_ASSIGNED,
        recipient=agent,
        target=("lead", lead_id),
        text=f"Lead {lead_id[:8]} was assigned to you.",
        link=NOTIFICATIONS_PATH,
    )


def _sla_breached(event: eventbus.Event) -> None:
    conversation = conversation_of(event)
    if conversation is None:
        return
    kind = str(event.payload.get("kind") or "")
    agent = (
        User.objects.filter(pk=conversation.assigned_to_id).first()
        if conversation.assigned_to_id
        else None
    )
    created = _notify(
        event,
        kind=AgentNotification.Kind.SLA_BREACH,
        recipient=agent,
        target=("conversation", str(conversation.pk)),
        text=f"Conversation {str(conversation.pk)[:8]} missed its {kind} deadline.",
        link=NOTIFICATIONS_PATH,
    )
    if created:
        alerts.alert(
            "Conversation SLA breached",
            organization_id=str(event.organization_id),
            conversation_id=str(conversation.pk),
            kind=kind,
            due_at=event.payload.get("due_at"),
        )


def _notify(
    event: eventbus.Event,
    *,
    kind: str,
    recipient: User | None,
    target: tuple[str, str],
    text: str,
    link: str,
) -> bool:
    """The notification (and its e-mail) for this event; False when it exists (a redelivery)."""
    notification, created = AgentNotification.objects.get_or_create(
        source_event_id=event.id,
        kind=kind,
        defaults={
            "organization_id": event.organization_id,
            "recipient": recipient,
            "target_type": target[0],
            "target_id": target[1],
            "text": text,
        },
    )
    if created and recipient is not None and recipient.email:
        send_mail(
            subject=text,
            message=f"{text}\n\nOpen: {link}",
            from_email=None,
            recipient_list=[recipient.email],
        )
        AgentNotification.objects.filter(pk=notification.pk).update(emailed_at=timezone.now())
    return created


def _owns(event: eventbus.Event, lead_id: str, user_id: int) -> bool:
    """Whether the event's organization has the lead `lead_id`, owned by `user_id`, right now."""
    try:
        key = uuid.UUID(lead_id)
    except ValueError:
        return False
    leads = Lead.objects.filter(organization_id=event.organization_id, pk=key, owner_id=user_id)
    return leads.exists()
