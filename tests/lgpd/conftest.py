"""LGPD fixtures: a data subject with records in every category, private export storage, a
controlled clock, and a drain of the LGPD consumers."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.utils import timezone

import eventbus
from core import audit
from core.models import IdempotencyKey, Organization
from crm.models import Contact, Order
from crm.services import contact_identity_add
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, DeliveryAttempt
from lgpd import services
from lgpd.handlers import EXPORT_CONSUMER, REDACT_CONSUMER
from lgpd.models import DataRequest
from tests.support.factories import (
    ContactFactory,
    ConversationFactory,
    LeadActivityFactory,
    LeadFactory,
    MessageFactory,
    OrderFactory,
)
from tests.support.storage import use_local_storage
from webhooks.models import Attempt, Subscription

NAME = "Maria Aparecida Souza"
PHONE = "+55 11 98765-4321"
EMAIL = "maria.souza@example.com"
CPF = "123.456.789-09"
# Every spelling the subject's data could be found under.
NEEDLES = (NAME, PHONE, EMAIL, CPF, "12345678909", "5511987654321", "11987654321")


@dataclass
class World:
    org: Organization
    contact: Contact
    other: Contact  # another person of the same organization (shares a surname)
    order: Order
    subscription: Subscription


@pytest.fixture
def export_storage(settings: Any, tmp_path: Path) -> Path:
    use_local_storage(settings, "lgpd_exports", tmp_path / "exports")
    settings.LGPD = {**settings.LGPD, "DPO_EMAIL": "dpo@example.com"}
    return tmp_path / "exports"


@pytest.fixture
def clock() -> Iterator[time_machine.Coordinates]:
    """Frozen time, 30 days in the past, so D+15 is still before the real now (webhook sends)."""
    start = timezone.now().replace(microsecond=0) - dt.timedelta(days=30)
    with time_machine.travel(start, tick=False) as coordinates:
        yield coordinates


def drain_lgpd() -> int:
    """Run the LGPD consumers in-process until nothing is due; returns deliveries claimed."""
    worker = Worker(WorkerOptions(consumers=[EXPORT_CONSUMER, REDACT_CONSUMER], listen=False))
    total = 0
    while claimed := worker.run_once():
        total += claimed
    return total


def run_after(world: World, clock: time_machine.Coordinates, kind: str, days: int) -> DataRequest:
    """Create a request, move the clock `days` (and a second) on, drain; the request after it."""
    request = request_for(world, kind)
    clock.shift(dt.timedelta(days=days, seconds=1))
    drain_lgpd()
    request.refresh_from_db()
    return request


def request_for(world: World, kind: str) -> DataRequest:
    return services.data_request_create(
        organization_id=world.org.pk,
        contact_id=world.contact.pk,
        kind=kind,
        channel="command",
        actor="test",
    )


@pytest.fixture
def world(org: Organization, export_storage: Path, clock: time_machine.Coordinates) -> World:
    """The subject with records in every category, and traces of them all over the bus."""
    contact = ContactFactory(organization=org, name=NAME, phone=PHONE, email=EMAIL, cpf=CPF)
    contact_identity_add(contact, phone=PHONE, email=EMAIL, cpf=CPF)  # as contact_resolve does
    other = ContactFactory(organization=org, name="João Souza", phone="+55 21 91234-5678", email="")
    subscription = Subscription.objects.create(
        organization=org,
        url="https://hooks.example.com/in",
        event_types=["*"],
        secret_encrypted="unused",
    )
    _conversation(org, contact)
    order = _order_and_lead(org, contact)
    services.consent_record(
        contact=contact,
        consent_type="marketing_whatsapp",
        granted=True,
        source="whatsapp",
        evidence=f"Eu, {NAME}, CPF {CPF}, aceito receber ofertas.",
    )
    _bus_traces(org, contact, subscription)
    return World(org, contact, other, order, subscription)


def _conversation(org: Organization, contact: Contact) -> None:
    chat = ConversationFactory(
        organization=org, contact=contact, external_chat_id="5511987654321@c.us"
    )
    MessageFactory(
        organization=org,
        conversation=chat,
        body=f"Oi, sou {NAME}. CPF {CPF}, e-mail {EMAIL}, fone {PHONE}. Quero o pedido 42.",
        media_urls=[f"https://media.example.com/{EMAIL}/documento-{CPF}.jpg"],
        sentiment="neutral",  # AI-derived (the ai_derived category)
        sentiment_score=0.0,
    )
    MessageFactory(
        organization=org, conversation=chat, direction="outbound", body="Olá Maria! Pedido 42 ok."
    )


def _order_and_lead(org: Organization, contact: Contact) -> Order:
    order = OrderFactory(
        organization=org,
        contact=contact,
        number="42",
        items=[{"sku": "TSHIRT-M", "name": "Camiseta", "qty": 2, "unit_cents": 7995}],
        customer_name=NAME,
        customer_email=EMAIL,
        customer_phone=PHONE,
        shipping_address="Rua das Flores, 10 - São Paulo",
    )
    lead = LeadFactory(organization=org, contact=contact, name=NAME)
    LeadActivityFactory(organization=org, lead=lead, note=f"Ligar para {PHONE}")
    return order


def _bus_traces(org: Organization, contact: Contact, subscription: Subscription) -> None:
    """Events (with a pending webhook delivery each), failure logs, audit, stored responses."""
    created = eventbus.emit(
        "contact.created",
        organization=org,
        entity_kind="contact",
        entity_id=contact.pk,
        payload={"contact_id": str(contact.pk), "phone": PHONE, "source": "whatsapp", "name": NAME},
        metadata={"trace_id": f"crm-import:{EMAIL}"},
    )
    # An event about another entity that merely mentions the subject (found by the search).
    eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="t",
        payload={"n": 1, "note": f"cpf {CPF}"},
    )
    delivery = Delivery.objects.get(event=created, consumer=subscription.consumer)
    Delivery.objects.filter(pk=delivery.pk).update(last_error=f"422: invalid email {EMAIL}")
    DeliveryAttempt.objects.create(
        delivery=delivery,
        attempt=1,
        outcome="retry",
        error=f"rejected {PHONE}",
        created_at=timezone.now(),
    )
    Attempt.objects.create(
        delivery=delivery,
        subscription=subscription,
        organization=org,
        attempt=1,
        webhook_id=uuid.uuid4(),
        url=subscription.url,
        status_code=422,
        duration_ms=12,
        response_excerpt=f'{{"error": "duplicate contact {NAME} <{EMAIL}>"}}',
        created_at=timezone.now(),
    )
    audit.record(
        actor="admin:ops",
        action="contact.merge",
        target_type="deskcomm.contact",
        target_id=contact.pk,
        organization_id=org.pk,
        reason=f"duplicate of {EMAIL}",
        details={"phone": PHONE},
    )
    IdempotencyKey.objects.create(
        organization=org,
        scope="events.create",
        key="k1",
        request_hash="0" * 64,
        status_code=201,
        response={"payload": {"phone": PHONE}},
        created_at=timezone.now(),
    )
