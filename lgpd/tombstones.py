"""Redaction that sticks: the redacted subject's identifiers as keyed digests (tombstones).

`record` runs in the redaction's transaction, before the identity is blanked; `redacted` is
what an import asks before it stores a person (nuvemshop.upserts: the shop keeps the buyer's
name, e-mail and phone on its orders, so the next `order/updated` would otherwise re-create the
contact). Spellings are normalised as the CRM matches them: the e-mail case-insensitively, the
phone's digits with and without +55, the CPF's 11 digits.
"""

from __future__ import annotations

import uuid

from core import crypto
from crm.models import Contact, ContactIdentity, cpf_digits, phone_digits
from lgpd.models import RedactedIdentifier

CONTEXT = "lgpd_tombstone"


def digests(*, email: str = "", phone: str = "", cpf: str = "") -> set[str]:
    values = {f"phone:{digits}" for digits in phone_digits(phone)}
    if email.strip():
        values.add(f"email:{email.strip().lower()}")
    if digits := cpf_digits(cpf):
        values.add(f"cpf:{digits}")
    return {crypto.blind_index(CONTEXT, value) for value in values}


def record(contact: Contact, *, request_id: uuid.UUID) -> int:
    """Keep the contact's identifiers as tombstones, its own and its identities' (the phones
    and e-mails a merge brought in); the number of new ones."""
    found = digests(email=contact.email, phone=contact.phone, cpf=contact.cpf)
    for kind, value in contact.identities.values_list("kind", "value"):
        if kind == ContactIdentity.Kind.EMAIL:
            found |= digests(email=value)
        elif kind == ContactIdentity.Kind.PHONE:
            found |= digests(phone=value)
    rows = [
        RedactedIdentifier(organization_id=contact.organization_id, digest=d, request_id=request_id)
        for d in sorted(found)
    ]
    created = RedactedIdentifier.objects.bulk_create(rows, ignore_conflicts=True)
    return len(created)


def redacted(
    organization_id: uuid.UUID, *, email: str = "", phone: str = "", cpf: str = ""
) -> bool:
    """True when any of these identifiers belongs to a subject redacted in the organization."""
    found = digests(email=email, phone=phone, cpf=cpf)
    return (
        bool(found)
        and RedactedIdentifier.objects.filter(
            organization_id=organization_id, digest__in=found
        ).exists()
    )
