"""The CRM's contact matching rule (crm.selectors.match_contact) and the CPF's blind index."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection
from django.utils import timezone

from crm.models import Contact
from crm.selectors import match_contact
from tests.support.factories import ContactFactory, OrganizationFactory

pytestmark = pytest.mark.django_db


def test_email_then_cpf_then_phone_digits_within_the_organization() -> None:
    org, other = OrganizationFactory(), OrganizationFactory()
    by_email = ContactFactory(organization=org, email="Ana@Example.com", phone="")
    by_cpf = ContactFactory(organization=org, email="", phone="", cpf="123.456.789-09")
    by_phone = ContactFactory(organization=org, email="", phone="+55 (11) 98765-4321")
    ContactFactory(organization=other, email="bia@example.com", cpf="987.654.321-00")

    assert match_contact(organization_id=org.pk, email="ana@example.COM ") == by_email
    assert match_contact(organization_id=org.pk, cpf="12345678909") == by_cpf
    assert match_contact(organization_id=org.pk, phone="11987654321") == by_phone
    assert match_contact(organization_id=org.pk, phone="5511987654321") == by_phone
    # the e-mail wins over the CPF; nothing of another tenant ever matches
    assert match_contact(organization_id=org.pk, email="ana@example.com", cpf="12345678909") == (
        by_email
    )
    assert match_contact(organization_id=org.pk, email="bia@example.com") is None
    assert match_contact(organization_id=org.pk, cpf="987.654.321-00") is None
    assert match_contact(organization_id=org.pk, phone="11 5555-0000", cpf="1234") is None


def test_an_anonymized_contact_never_matches() -> None:
    contact = ContactFactory(email="ana@example.com", cpf="123.456.789-09")
    Contact.objects.filter(pk=contact.pk).update(anonymized_at=timezone.now())
    org_id = contact.organization_id
    assert match_contact(organization_id=org_id, email="ana@example.com") is None
    assert match_contact(organization_id=org_id, cpf="12345678909") is None


def test_the_cpf_digest_is_keyed_not_a_plain_hash_and_follows_the_cpf() -> None:
    contact = ContactFactory(cpf="123.456.789-09")
    assert contact.cpf_digest and contact.cpf_digest != hashlib.sha256(b"12345678909").hexdigest()
    assert ContactFactory(cpf="12345678909").cpf_digest == contact.cpf_digest  # digits only
    contact.cpf = ""
    assert contact.cpf_digest == ""


def test_each_step_is_an_indexed_query() -> None:
    org = OrganizationFactory()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        for sql, params in (
            (
                "EXPLAIN SELECT id FROM deskcomm_contact WHERE organization_id = %s "
                "AND cpf_digest = 'x'",
                [org.pk],
            ),
            (
                "EXPLAIN SELECT id FROM deskcomm_contact WHERE organization_id = %s "
                "AND phone <> '' AND regexp_replace(phone, '\\D', '', 'g') = ANY(%s)",
                [org.pk, ["11987654321"]],
            ),
        ):
            cursor.execute(sql, params)
            plan = " ".join(row[0] for row in cursor.fetchall())
            assert "contact_cpf_digest_idx" in plan or "contact_phone_digits_idx" in plan, plan
