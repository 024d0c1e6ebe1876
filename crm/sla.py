"""sla-tracker: first-response and resolution deadlines per conversation.

`conversation.opened` starts both clocks (`CRM["SLA_FIRST_RESPONSE_SECONDS"]`,
`CRM["SLA_RESOLUTION_SECONDS"]` from the event's time); `conversation.resolved` stops the
resolution clock and `conversation.reopened` restarts it. The `sla-breaches` job (every minute)
records the first response (the first outbound message written by an agent or the AI) and, for
a deadline that passed without it, marks the breach and emits `conversation.sla_breached` once
(notification-worker tells the assignee and raises an alert).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from django.db import transaction
from django.utils import timezone

import eventbus
from crm.conf import crm_settings
from crm.conversation_models import ConversationSla
from crm.conversations import conversation_of
from crm.models import Conversation, ConversationStatus, Message

RESPONDERS = (Message.Sender.AGENT, Message.Sender.AI)
BATCH = 5000


def _seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)


def track(event: eventbus.Event) -> None:
    conversation = conversation_of(event)
    if conversation is None:
        return
    at = event.created_at
    if event.event_type == "conversation.opened":
        ConversationSla.objects.get_or_create(
            conversation=conversation,
            defaults={
                "organization_id": conversation.organization_id,
                "opened_at": at,
                "first_response_due_at": at + _seconds(crm_settings.SLA_FIRST_RESPONSE_SECONDS),
                "resolution_due_at": at + _seconds(crm_settings.SLA_RESOLUTION_SECONDS),
            },
        )
    elif event.event_type == "conversation.resolved":
        ConversationSla.objects.filter(conversation=conversation, resolved_at=None).update(
            resolved_at=at
        )
    elif event.event_type == "conversation.reopened":
        ConversationSla.objects.filter(conversation=conversation).update(
            resolved_at=None,
            resolution_breached_at=None,
            resolution_due_at=at + _seconds(crm_settings.SLA_RESOLUTION_SECONDS),
        )


def check_breaches(*, now: dt.datetime | None = None) -> int:
    """Record first responses and resolutions; mark and emit the missed deadlines. Returns the
    breaches found."""
    now = now or timezone.now()
    breaches = 0
    waiting = ConversationSla.objects.filter(
        first_response_at=None, first_response_breached_at=None
    ).order_by("first_response_due_at")[:BATCH]
    for row in waiting:
        first = (
            Message.objects.filter(
                conversation_id=row.conversation_id,
                direction=Message.Direction.OUTBOUND,
                sender__in=RESPONDERS,
                created_at__gte=row.opened_at,
            )
            .order_by("created_at")
            .values_list("created_at", flat=True)
            .first()
        )
        if first is not None and first <= row.first_response_due_at:
            ConversationSla.objects.filter(pk=row.pk).update(first_response_at=first)
        elif row.first_response_due_at <= now:
            fields = {"first_response_at": first} if first is not None else {}
            breaches += _breach(row, "first_response", row.first_response_due_at, now, fields)
    unresolved = ConversationSla.objects.filter(
        resolved_at=None, resolution_breached_at=None, resolution_due_at__lte=now
    ).order_by("resolution_due_at")[:BATCH]
    for row in unresolved:
        conversation = Conversation.objects.get(pk=row.conversation_id)
        if conversation.status == ConversationStatus.RESOLVED and conversation.resolved_at:
            ConversationSla.objects.filter(pk=row.pk).update(resolved_at=conversation.resolved_at)
            if conversation.resolved_at <= row.resolution_due_at:
                continue
        breaches += _breach(row, "resolution", row.resolution_due_at, now, {})
    return breaches


def _breach(
    row: ConversationSla,
    kind: str,
    due: dt.datetime,
    now: dt.datetime,
    fields: Mapping[str, dt.datetime],
) -> int:
    with transaction.atomic():
        marked = ConversationSla.objects.filter(pk=row.pk, **{f"{kind}_breached_at": None}).update(
            **{f"{kind}_breached_at": now, **fields}
        )
        if not marked:
            return 0
        eventbus.emit(
            "conversation.sla_breached",
            organization=row.organization_id,
            entity_kind="conversation",
            entity_id=row.conversation_id,
            payload={
                "conversation_id": str(row.conversation_id),
                "kind": kind,
                "due_at": due.isoformat(),
                "breached_at": now.isoformat(),
            },
            idempotency_key=f"conversation.sla_breached:{row.conversation_id}:{kind}:{due.isoformat()}",
        )
    return 1
