"""Handlers run inside their delivery's organization (row-level security), and an id from
another organization is refused and audited (eventbus.store.tenancy)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

import eventbus
from core.models import AuditLog, Organization
from crm.models import Contact
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from eventbus.store.registry import make_consumer, registry
from eventbus.store.tenancy import ACTION, guard_payload
from tests.support.factories import ContactFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("enforced")]

LOOKING = "looking-worker"
GUARDED = "guarded-worker"
SEEN: list[tuple[str, bool]] = []


def look(event: eventbus.Event) -> None:
    """Looks the payload's contact up with no tenant filter at all: only the wall stands."""
    found = Contact.objects.filter(pk=event.payload["contact_id"]).exists()
    SEEN.append((str(event.organization_id), found))


def guarded(event: eventbus.Event) -> None:
    guard_payload(event, {"contact_id": Contact})
    SEEN.append((str(event.organization_id), True))


@pytest.fixture
def consumers() -> Iterator[None]:
    SEEN.clear()
    with registry.temporarily(
        make_consumer(LOOKING, look, events=["test.job"]),
        make_consumer(GUARDED, guarded, events=["test.job"], atomic=True),
    ):
        yield


def drain(*names: str) -> None:
    worker = Worker(WorkerOptions(consumers=list(names), listen=False))
    while worker.run_once():
        pass


def emit(org: Organization, contact: Contact) -> EventLog:
    return eventbus.emit(
        "test.job",
        organization=org,
        entity_kind="t",
        payload={"n": 1, "contact_id": str(contact.pk)},
    )


@pytest.mark.usefixtures("consumers")
def test_a_handler_sees_only_its_deliverys_organization(
    org: Organization, org_b: Organization
) -> None:
    contact_a = ContactFactory(organization=org)
    emit(org, contact_a)
    emit(org_b, contact_a)  # B names A's contact
    drain(LOOKING)
    assert sorted(SEEN) == sorted([(str(org.pk), True), (str(org_b.pk), False)])
    # The drain gave the connection its own scope back: this test still sees both tenants.
    assert Contact.objects.filter(pk=contact_a.pk).exists()


@pytest.mark.usefixtures("consumers")
def test_another_tenants_id_is_refused_dead_at_once_and_audited(
    org: Organization, org_b: Organization
) -> None:
    contact_a = ContactFactory(organization=org)
    attack = emit(org_b, contact_a)
    drain(GUARDED)
    assert SEEN == []  # never acted on
    dead = Delivery.objects.get(event_id=attack.id, consumer=GUARDED)
    assert (dead.status, dead.attempts) == ("dead", 1)
    assert "does not belong to the event's organization" in (dead.last_error or "")
    [row] = AuditLog.objects.filter(action=ACTION)
    assert row.organization_id == org_b.pk  # the attacker's log, not the victim's
    assert row.target_id == str(contact_a.pk)
    assert row.details["event_id"] == str(attack.id)
    assert row.details["consumer"] == GUARDED
    assert str(org.pk) not in str(row.details) + row.reason  # the victim is not named
    # Its own contact, and an id that exists nowhere, are acted on as before.
    emit(org_b, ContactFactory(organization=org_b))
    eventbus.emit(
        "test.job",
        organization=org_b,
        entity_kind="t",
        payload={"n": 1, "contact_id": str(uuid.uuid4())},
    )
    drain(GUARDED)
    assert [(str(org_b.pk), True), (str(org_b.pk), True)] == SEEN
    assert AuditLog.objects.filter(action=ACTION).count() == 1
