"""Helpers of the CRM tests: agents of an organization, an event as a consumer sees it, a run of
one consumer through the real worker."""

from __future__ import annotations

from django.contrib.auth.models import User

import eventbus
from core.models import Organization, StaffOrganization
from crm.models import Conversation
from eventbus.store.models import EventLog


def agent(organization: Organization, username: str, email: str = "") -> User:
    user = User.objects.create_user(
        username=username, email=email or f"{username}@example.test", is_staff=True
    )
    StaffOrganization.objects.create(user=user, organization=organization)
    return user


def as_event(row: EventLog, consumer: str = "test-worker") -> eventbus.Event:
    return eventbus.Event(
        id=row.id,
        organization_id=row.organization_id,
        event_type=row.event_type,
        entity_kind=row.entity_kind,
        entity_id=row.entity_id,
        payload=row.payload,
        metadata=row.metadata,
        created_at=row.created_at,
        consumer=consumer,
        delivery_id=0,
        attempt=1,
        max_attempts=1,
    )


def run(*consumers: str) -> None:
    from eventbus.dispatch.worker import Worker, WorkerOptions

    Worker(
        WorkerOptions(consumers=list(consumers), once=True, listen=False, startup_jitter=0)
    ).run()


def events(event_type: str) -> list[EventLog]:
    return list(EventLog.objects.filter(event_type=event_type).order_by("created_at"))


def emit_about(
    event_type: str, conversation: Conversation, *, organization: Organization, **payload: object
) -> EventLog:
    """`event_type` about `conversation` (its id and contact's in the payload), emitted in
    `organization` (another tenant's, to test the guard)."""
    return eventbus.emit(
        event_type,
        organization=organization,
        entity_kind="conversation",
        entity_id=conversation.pk,
        payload={
            "conversation_id": str(conversation.pk),
            "contact_id": str(conversation.contact_id),
            **payload,
        },
    )
