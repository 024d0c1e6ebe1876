"""Redaction (R-L3): D+15, cascade over every category, no trace left anywhere, money kept,
idempotent, and 3 failures -> DLQ + DPO alert."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import time_machine
from django.core import mail

from core.models import AuditLog
from crm import personal_data as categories
from crm.models import Contact, Message, Order
from eventbus.store.models import Delivery, EventLog
from lgpd import tombstones
from lgpd.handlers import REDACT_CONSUMER
from lgpd.models import DataRequest, RedactedIdentifier
from tests.lgpd.conftest import (
    EMAIL,
    NAME,
    NEEDLES,
    World,
    drain_lgpd,
    request_for,
    run_after,
)
from tests.support.factories import OrderFactory, OrganizationFactory
from tests.support.traces import traces as find_traces

pytestmark = pytest.mark.django_db


def traces() -> list[str]:
    return find_traces(NEEDLES)


def redact_at_d15(world: World, clock: time_machine.Coordinates) -> DataRequest:
    return run_after(world, clock, "redact", 15)


def test_the_search_sees_the_subject_everywhere_before(world: World) -> None:
    hits = traces()
    for where in (
        "crm.Contact.name",
        "crm.Message.body",
        "crm.Message.media_urls",
        "crm.Order.customer_email",
        "crm.ConsentRecord.evidence",
        "crm.LeadActivity.note",
        "crm.Conversation.external_chat_id",
        "eventbus.EventLog.payload",
        "eventbus.EventLog.metadata",
        "eventbus.Delivery.last_error",
        "eventbus.DeliveryAttempt.error",
        "webhooks.Attempt.response_excerpt",
        "core.AuditLog.reason",
        "core.IdempotencyKey.response",
    ):
        assert any(hit.startswith(where) for hit in hits), (where, hits)


def test_nothing_happens_before_d15(world: World, clock: time_machine.Coordinates) -> None:
    request = request_for(world, "redact")
    clock.shift(dt.timedelta(days=14, hours=23))
    drain_lgpd()  # runs the export consumer's D+7 delivery, which ignores redact requests
    pending = Delivery.objects.get(consumer=REDACT_CONSUMER)
    assert (pending.status, pending.attempts) == ("pending", 0)
    world.contact.refresh_from_db()
    assert world.contact.name and world.contact.anonymized_at is None
    request.refresh_from_db()
    assert request.status == "received" and request.redacted_at is None


def test_redaction_leaves_no_trace_in_any_column(
    world: World, clock: time_machine.Coordinates
) -> None:
    request = redact_at_d15(world, clock)
    assert traces() == []
    assert request.status == "completed"
    assert request.redacted_at == request.completed_at
    assert request.redacted_at - request.received_at >= dt.timedelta(days=15)


def test_redaction_keeps_money_messages_and_other_people(
    world: World, clock: time_machine.Coordinates
) -> None:
    redact_at_d15(world, clock)
    order = Order.objects.get(pk=world.order.pk)
    assert (order.total_cents, order.currency, order.number) == (15990, "BRL", "42")
    assert order.items == [{"sku": "TSHIRT-M", "name": "Camiseta", "qty": 2, "unit_cents": 7995}]
    assert order.customer_name == order.customer_email == order.shipping_address == ""
    bodies = list(Message.objects.order_by("direction").values_list("body", flat=True))
    assert bodies[0].endswith("Quero o pedido 42.") and "[redacted]" in bodies[0]
    assert bodies[1] == "Olá [redacted]! Pedido 42 ok."
    contact = Contact.objects.get(pk=world.contact.pk)
    assert (contact.name, contact.phone, contact.email, contact.cpf) == ("", "", "", "")
    assert contact.anonymized_at is not None
    other = Contact.objects.get(pk=world.other.pk)
    assert (other.name, other.phone) == ("João Souza", "+55 21 91234-5678")


def test_redaction_announces_itself_and_repeats_are_no_ops(
    world: World, clock: time_machine.Coordinates
) -> None:
    request = redact_at_d15(world, clock)
    applied = EventLog.objects.get(event_type="lgpd.redact_applied")
    assert applied.payload == {
        "request_id": str(request.pk),
        "contact_id": str(world.contact.pk),
        "scope": "crm_only",
    }
    anonymized = EventLog.objects.get(event_type="contact.anonymized")
    assert anonymized.payload["lgpd_request_id"] == str(request.pk)
    # The organization's webhook subscription ("*") receives it (LGPD Art. 18 §6).
    assert Delivery.objects.filter(event=anonymized, consumer=world.subscription.consumer).exists()
    audits = AuditLog.objects.filter(action="lgpd.redact.apply").count()

    again = request_for(world, "redact")  # a second request for the same person
    clock.shift(dt.timedelta(days=16))
    drain_lgpd()
    again.refresh_from_db()
    assert again.status == "completed" and again.redacted_at is None
    assert EventLog.objects.filter(event_type="contact.anonymized").count() == 1
    assert AuditLog.objects.filter(action="lgpd.redact.apply").count() == audits


def test_three_failures_dead_letter_and_alert_the_dpo(
    world: World, clock: time_machine.Coordinates, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Any, subject: Any) -> int:
        raise RuntimeError("storage unavailable")

    monkeypatch.setattr(categories.MessageCategory, "redact", broken)
    request_for(world, "redact")
    clock.shift(dt.timedelta(days=15, seconds=1))
    for _ in range(3):
        drain_lgpd()
        clock.shift(dt.timedelta(hours=3))  # past any backoff step
    delivery = Delivery.objects.get(consumer=REDACT_CONSUMER)
    assert (delivery.status, delivery.attempts) == ("dead", 3)
    assert "storage unavailable" in (delivery.last_error or "")
    [alert] = mail.outbox
    assert alert.to == ["dpo@example.com"]
    assert REDACT_CONSUMER in alert.subject
    # Nothing was half-applied: the transaction rolled back every category.
    contact = Contact.objects.get(pk=world.contact.pk)
    assert contact.anonymized_at is None and contact.name


def unlinked_orders(world: World) -> dict[str, Order]:
    """Orders of no contact (created through the API or the shop): one per identifier of the
    subject, and two of other people (a shared surname, the other contact's phone)."""
    shown = {
        "by_email": {"customer_email": EMAIL.upper()},
        "by_phone": {"customer_phone": "5511987654321"},
        "by_name": {"customer_name": NAME},
        "surname_only": {"customer_name": "Ana Souza", "customer_email": "ana@example.com"},
        "other_person": {"customer_name": "João Souza", "customer_phone": "+55 21 91234-5678"},
    }
    return {
        key: OrderFactory(organization=world.org, contact=None, number=key, **fields)
        for key, fields in shown.items()
    }


def test_redaction_covers_orders_holding_the_subjects_identifiers_without_a_link(
    world: World, clock: time_machine.Coordinates
) -> None:
    """Issue 41 item 5: found by e-mail, phone or full name, never by a surname alone."""
    orders = unlinked_orders(world)
    redact_at_d15(world, clock)
    for key in ("by_email", "by_phone", "by_name"):
        order = Order.objects.get(pk=orders[key].pk)
        assert (order.customer_name, order.customer_email, order.customer_phone) == ("", "", "")
        assert order.total_cents == 15990  # the money stays
    assert Order.objects.get(pk=orders["surname_only"].pk).customer_name == "Ana Souza"
    assert Order.objects.get(pk=orders["other_person"].pk).customer_name == "João Souza"
    assert traces() == []


def test_redaction_keeps_tombstones_of_the_identifiers_and_never_the_values(
    world: World, clock: time_machine.Coordinates
) -> None:
    """Issue 41 item 6: what an import asks before storing a person again."""
    assert not tombstones.redacted(world.org.pk, email=EMAIL)
    redact_at_d15(world, clock)
    stored = list(RedactedIdentifier.objects.values_list("digest", flat=True))
    assert stored and not any(needle in "".join(stored) for needle in NEEDLES)
    assert tombstones.redacted(world.org.pk, email=EMAIL.upper())
    assert tombstones.redacted(world.org.pk, phone="11987654321")
    assert tombstones.redacted(world.org.pk, cpf="12345678909")
    assert not tombstones.redacted(world.org.pk, phone="+55 21 91234-5678")  # the other person
    assert not tombstones.redacted(OrganizationFactory().pk, email=EMAIL)  # another tenant
