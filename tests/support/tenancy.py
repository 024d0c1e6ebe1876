"""The shape of a refused cross-tenant event (issue 38): dead at its first attempt, audited in
the emitting organization's log, never in the victim's."""

from __future__ import annotations

from core.models import AuditLog, Organization
from crm.models import Message
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from eventbus.store.tenancy import ACTION


def message_ids(message: Message) -> dict[str, str]:
    """The ids a `message.*` payload names for `message`."""
    return {
        "message_id": str(message.pk),
        "conversation_id": str(message.conversation_id),
        "contact_id": str(message.conversation.contact_id),
    }


def drain(*consumers: str) -> None:
    """Run `consumers` in-process until nothing is due."""
    worker = Worker(WorkerOptions(consumers=list(consumers), listen=False))
    while worker.run_once():
        pass


def assert_refused(
    attack: EventLog, consumer: str, attacker: Organization, action: str = ACTION
) -> None:
    dead = Delivery.objects.get(event_id=attack.id, consumer=consumer)
    assert (dead.status, dead.attempts) == ("dead", 1), (dead.status, dead.last_error)
    assert action in (dead.last_error or "")
    [row] = AuditLog.objects.filter(action=action, details__event_id=str(attack.id))
    assert row.organization_id == attacker.pk
    assert row.details["consumer"] == consumer
