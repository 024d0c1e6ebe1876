"""The conversation lifecycle: assign, resolve, reopen, the handoff to a person, opting back in.

Seed 000 §3.5 names no trigger for `conversation.assigned/resolved/reopened`: they are emitted
here, by services, each in the same transaction as the row change (a rolled-back change leaves
no event). Payloads carry ids and actors only (webhooks carry them):

- `conversation.assigned` `{conversation_id, from_user_id, to_user_id, mode}`, mode `manual`
  (an agent or an integrator chose) or `round_robin` (a handoff routed it).
- `conversation.resolved` `{conversation_id, resolved_by, resolution_note, duration_s}`:
  duration from the conversation's opening (or its last reopening) to the resolution.
- `conversation.reopened` `{conversation_id, reopened_by, reason}`.

`handoff_assign` routes a handed-off conversation (`ai.handoff_triggered`) to the
organization's configured owner (`HandoffRouting.owner`) or, without one, to its agents (active
staff users bound to it, core.StaffOrganization) in turn. `resume_bot` turns the AI responder
back on. `opt_in` unblocks a contact who wrote a START keyword (audited).
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

import eventbus
from core import audit
from core.models import StaffOrganization
from crm.conf import crm_settings
from crm.conversation_models import HandoffRouting, TemplateSuggestion
from crm.models import Contact, Conversation, ConversationStatus, Message
from crm.services import send_message
from eventbus.store.models import EventLog

MANUAL = "manual"
ROUND_ROBIN = "round_robin"


class ConversationStateError(ValueError):
    """The conversation is not in a state that allows this (resolving a resolved one...)."""


class NotAnAgent(ValueError):
    """The user is not an active agent of the conversation's organization."""


def agents_of(organization_id: uuid.UUID) -> list[User]:
    """The organization's agents: active staff users bound to it, by id (the round robin's
    order)."""
    ids = StaffOrganization.objects.filter(organization_id=organization_id).values("user_id")
    return list(User.objects.filter(pk__in=ids, is_active=True, is_staff=True).order_by("pk"))


def _locked(conversation: Conversation) -> Conversation:
    return Conversation.objects.select_for_update().get(pk=conversation.pk)


def assign(
    *, conversation: Conversation, user: User, actor: str, mode: str = MANUAL
) -> Conversation:
    """Assign `conversation` to `user` (an agent of its organization) and emit
    `conversation.assigned`, in one transaction. Assigning it to its assignee changes nothing
    and emits nothing."""
    if user.pk not in {agent.pk for agent in agents_of(conversation.organization_id)}:
        raise NotAnAgent(f"user {user.pk} is not an active agent of this organization")
    with transaction.atomic():
        current = _locked(conversation)
        if current.assigned_to_id == user.pk:
            return current
        previous = current.assigned_to_id
        current.assigned_to = user
        current.assigned_at = timezone.now()
        current.save(update_fields=["assigned_to", "assigned_at"])
        eventbus.emit(
            "conversation.assigned",
            organization=current.organization_id,
            entity_kind="conversation",
            entity_id=current.pk,
            payload={
                "conversation_id": str(current.pk),
                "from_user_id": previous,
                "to_user_id": user.pk,
                "mode": mode,
            },
        )
        audit.record(
            actor=actor,
            action="conversation.assigned",
            target_type="crm.Conversation",
            target_id=str(current.pk),
            organization_id=current.organization_id,
            details={"from_user_id": previous, "to_user_id": user.pk, "mode": mode},
        )
    return current


def resolve(*, conversation: Conversation, actor: str, note: str = "") -> Conversation:
    """Resolve an open conversation and emit `conversation.resolved` (duration in seconds since
    it was opened or last reopened), in one transaction. ConversationStateError when resolved."""
    with transaction.atomic():
        current = _locked(conversation)
        if current.status == ConversationStatus.RESOLVED:
            raise ConversationStateError("the conversation is already resolved")
        now = timezone.now()
        since = _opened_since(current)
        current.status = ConversationStatus.RESOLVED
        current.resolved_at = now
        current.resolved_by = actor
        current.save(update_fields=["status", "resolved_at", "resolved_by"])
        eventbus.emit(
            "conversation.resolved",
            organization=current.organization_id,
            entity_kind="conversation",
            entity_id=current.pk,
            payload={
                "conversation_id": str(current.pk),
                "resolved_by": actor,
                "resolution_note": note[:500],
                "duration_s": max(0, int((now - since).total_seconds())),
            },
        )
    return current


def _opened_since(conversation: Conversation) -> dt.datetime:
    """When the conversation's current period began: its last reopening, else its opening."""
    reopened = (
        EventLog.objects.filter(
            organization_id=conversation.organization_id,
            event_type="conversation.reopened",
            entity_id=conversation.pk,
        )
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    return reopened or conversation.created_at


def reopen(*, conversation: Conversation, actor: str, reason: str = "") -> Conversation:
    """Reopen a resolved conversation and emit `conversation.reopened`, in one transaction.
    ConversationStateError when it is open."""
    with transaction.atomic():
        current = _locked(conversation)
        if current.status != ConversationStatus.RESOLVED:
            raise ConversationStateError("the conversation is not resolved")
        current.status = ConversationStatus.OPEN
        current.resolved_at = None
        current.resolved_by = ""
        current.save(update_fields=["status", "resolved_at", "resolved_by"])
        eventbus.emit(
            "conversation.reopened",
            organization=current.organization_id,
            entity_kind="conversation",
            entity_id=current.pk,
            payload={
                "conversation_id": str(current.pk),
                "reopened_by": actor,
                "reason": reason[:500],
            },
        )
    return current


def handoff_assign(*, conversation: Conversation, actor: str) -> User | None:
    """Route a handed-off conversation: kept by its assignee when it has one, else given to the
    organization's owner or its next agent in turn (`conversation.assigned`, round_robin).
    None when the organization has no agent (the admin's handoffs screen still lists it)."""
    if conversation.assigned_to_id is not None:
        return User.objects.filter(pk=conversation.assigned_to_id).first()
    with transaction.atomic():
        routing, _ = HandoffRouting.objects.get_or_create(
            organization_id=conversation.organization_id
        )
        routing = HandoffRouting.objects.select_for_update().get(pk=routing.pk)
        agents = agents_of(conversation.organization_id)
        chosen = _next_agent(routing, agents)
        if chosen is None:
            return None
        assign(conversation=conversation, user=chosen, actor=actor, mode=ROUND_ROBIN)
        routing.last_assigned = chosen
        routing.save(update_fields=["last_assigned", "updated_at"])
    return chosen


def _next_agent(routing: HandoffRouting, agents: list[User]) -> User | None:
    if routing.owner_id is not None and any(a.pk == routing.owner_id for a in agents):
        return next(a for a in agents if a.pk == routing.owner_id)
    if not agents:
        return None
    after = [
        a for a in agents if routing.last_assigned_id is None or a.pk > routing.last_assigned_id
    ]
    return (after or agents)[0]


def resume_bot(*, conversation: Conversation, actor: str) -> bool:
    """Turn the AI responder back on for a handed-off conversation (audited); False when it
    was on."""
    with transaction.atomic():
        changed = Conversation.objects.filter(pk=conversation.pk, bot_active=False).update(
            bot_active=True
        )
        if changed:
            audit.record(
                actor=actor,
                action="conversation.bot_resumed",
                target_type="crm.Conversation",
                target_id=str(conversation.pk),
                organization_id=conversation.organization_id,
            )
    conversation.bot_active = True
    return bool(changed)


def opt_in(*, contact: Contact, keyword: str, message_id: Any) -> bool:
    """A contact blocked by a stop keyword wrote a START keyword: unblock them (audited, as
    `contact.opted_in` by the system actor `whatsapp-inbound`). Only a STOP block is lifted: a
    contact an operator blocked stays blocked. False when nothing changed."""
    with transaction.atomic():
        changed = Contact.objects.filter(
            pk=contact.pk, blocked_at__isnull=False, blocked_reason="stop_keyword"
        ).update(blocked_at=None, blocked_reason="")
        if changed:
            audit.record(
                actor=audit.system_actor("whatsapp-inbound"),
                action="contact.opted_in",
                target_type="crm.Contact",
                target_id=str(contact.pk),
                organization_id=contact.organization_id,
                details={"keyword": keyword, "message_id": str(message_id)},
            )
    if changed:
        contact.blocked_at = None
        contact.blocked_reason = ""
    return bool(changed)


def window_open(
    conversation: Conversation,
    *,
    inbound_at: dt.datetime | None = None,
    now: dt.datetime | None = None,
) -> bool:
    """The customer-service window is open: the contact wrote within `CRM["WINDOW_HOURS"]`
    (their last message: the conversation's `last_inbound_at`, or `inbound_at` when later)."""
    last = max((t for t in (conversation.last_inbound_at, inbound_at) if t), default=None)
    if last is None:
        return False
    return (now or timezone.now()) - last <= dt.timedelta(hours=crm_settings.WINDOW_HOURS)


def suggest_template(
    *, conversation: Conversation, reason: str, source_event_id: uuid.UUID
) -> TemplateSuggestion | None:
    """Record the re-engagement template for the agent (once per source event); None when the
    template is configured empty."""
    template = crm_settings.REENGAGE_TEMPLATE.strip()
    if not template:
        return None
    suggestion, _ = TemplateSuggestion.objects.get_or_create(
        source_event_id=source_event_id,
        defaults={
            "organization_id": conversation.organization_id,
            "conversation": conversation,
            "reason": reason,
            "template": template,
        },
    )
    return suggestion


def conversation_of(event: eventbus.Event) -> Conversation | None:
    """The conversation an event's payload names (`conversation_id`), in the event's
    organization only; None when it names none, a malformed id or no row there."""
    named = event.payload.get("conversation_id")
    if not named:
        return None
    try:
        return (
            Conversation.objects.filter(organization_id=event.organization_id, pk=str(named))
            .select_related("contact")
            .first()
        )
    except (ValueError, ValidationError):
        return None


def send_suggestion(*, suggestion: TemplateSuggestion) -> Message:
    """Send a suggested template (a template message may go outside the window) and mark the
    suggestion used, in one transaction; ConversationStateError when it was used already."""
    with transaction.atomic():
        current = TemplateSuggestion.objects.select_for_update().get(pk=suggestion.pk)
        if current.used_at is not None:
            raise ConversationStateError("this suggestion was sent already")
        message = send_message(
            conversation=current.conversation, body=current.template, is_template=True
        )
        current.used_at = timezone.now()
        current.save(update_fields=["used_at"])
    return message
