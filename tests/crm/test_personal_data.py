"""The CRM's LGPD categories follow a merge: the surviving contact's export and redaction cover
every record and identifier merged into it."""

from __future__ import annotations

import pytest

from core.lgpd_registry import REGISTRY
from core.models import Organization
from crm.models import ConsentRecord, Contact, ContactIdentity, Lead, Message, Order
from crm.services import contact_merge
from lgpd import tombstones
from lgpd.models import DataRequest
from lgpd.selectors import subject_for
from lgpd.services import data_request_create
from tests.crm.test_services import merged_pair

pytestmark = pytest.mark.django_db


def test_a_merged_contact_is_fully_exported_and_redacted(org: Organization) -> None:
    whatsapp, shop = merged_pair(org)
    stray = Order.objects.create(  # an order of the shop's e-mail, linked to no contact
        organization=org, number="S-2", total_cents=100, customer_email="maria.souza@example.com"
    )
    into = contact_merge(source=shop, into=whatsapp, actor="t")
    subject = subject_for(into)
    bundle = {category.name: category.export(subject) for category in REGISTRY}
    assert {row["number"] for row in bundle["orders"]} == {"S-1", "S-2"}
    assert [row["name"] for row in bundle["lead_activities"] if "name" in row] == [
        "Maria Souza - bota"
    ]
    assert len(bundle["consents"]) == 1 and len(bundle["messages"]) == 1
    identities = {(row["kind"], row["value"]) for row in bundle["contact_identities"]}
    assert ("email", "maria.souza@example.com") in identities
    assert ("phone", "+5521999990000") in identities  # the merged-in contact's phone

    for category in REGISTRY:
        category.redact(subject_for(Contact.objects.get(pk=into.pk)))
    assert not ContactIdentity.objects.exists()
    assert Order.objects.get(number="S-1").customer_email == ""
    assert Order.objects.get(pk=stray.pk).customer_email == ""
    assert Lead.objects.get().name != "Maria Souza - bota"
    assert Message.objects.get().body == "oi"  # kept, nothing personal in it
    assert ConsentRecord.objects.get().contact_id == into.pk
    merged_away = Contact.objects.get(pk=shop.pk)
    assert (merged_away.name, merged_away.email, merged_away.phone) == ("", "", "")


def test_tombstones_keep_the_merged_in_identifiers(org: Organization) -> None:
    whatsapp, shop = merged_pair(org)
    into = contact_merge(source=shop, into=whatsapp, actor="t")
    request = data_request_create(
        organization_id=org.pk,
        contact_id=into.pk,
        kind=DataRequest.Kind.REDACT,
        channel=DataRequest.Channel.API,
        actor="t",
    )
    tombstones.record(into, request_id=request.pk)
    assert tombstones.redacted(org.pk, phone="(21) 99999-0000")
    assert tombstones.redacted(org.pk, email="MARIA.SOUZA@example.com")
