"""The CRM records (crm.models) through their factories (tests/support/factories.py)."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction

from crm.models import Contact
from tests.support.factories import (
    ContactFactory,
    LeadActivityFactory,
    MessageFactory,
    OrderFactory,
    OrganizationFactory,
)

pytestmark = pytest.mark.django_db


def test_related_records_share_the_organization_they_are_made_for() -> None:
    org = OrganizationFactory()
    message = MessageFactory(organization=org)
    activity = LeadActivityFactory(organization=org)
    assert message.conversation.organization == message.conversation.contact.organization == org
    assert activity.lead.organization == activity.lead.contact.organization == org


def test_the_cpf_is_stored_encrypted_and_read_back_in_clear() -> None:
    contact = ContactFactory(cpf="123.456.789-09")
    with connection.cursor() as cursor:
        cursor.execute("SELECT cpf_encrypted FROM deskcomm_contact WHERE id = %s", [contact.pk])
        (stored,) = cursor.fetchone()
    assert stored and "123.456.789-09" not in stored
    assert Contact.objects.get(pk=contact.pk).cpf == "123.456.789-09"


def test_an_order_number_is_unique_within_its_organization_only() -> None:
    first = OrderFactory(number="42")
    OrderFactory(number="42")  # another organization: fine
    with pytest.raises(IntegrityError), transaction.atomic():
        OrderFactory(number="42", organization=first.organization)
