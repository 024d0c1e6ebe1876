"""CRM reads shared by the apps above (integrations match their customers with the CRM's rule)."""

from __future__ import annotations

import uuid

from django.db.models import F, Func, Value

from core import crypto
from crm.models import Contact, cpf_digits, phone_digits


def match_contact(
    *, organization_id: uuid.UUID, email: str = "", phone: str = "", cpf: str = ""
) -> Contact | None:
    """The organization's contact for a person seen elsewhere (a shop customer, a chat), by the
    CRM's rule: the e-mail (case-insensitive), else the CPF (its blind index), else the phone's
    digits (with or without +55). Anonymized contacts never match. None when nothing does.
    Each step is one indexed query."""
    contacts = Contact.objects.filter(organization_id=organization_id, anonymized_at__isnull=True)
    email = email.strip()
    if email and (found := contacts.filter(email__iexact=email).order_by("created_at").first()):
        return found
    digits = cpf_digits(cpf)
    if digits:
        digest = crypto.blind_index(Contact.CPF_CONTEXT, digits)
        if found := contacts.filter(cpf_digest=digest).order_by("created_at").first():
            return found
    variants = phone_digits(phone)
    if variants:
        found = (
            contacts.exclude(phone="")
            .annotate(
                digits=Func(
                    F("phone"), Value(r"\D"), Value(""), Value("g"), function="regexp_replace"
                )
            )
            .filter(digits__in=variants)
            .order_by("created_at")
            .first()
        )
        if found:
            return found
    return None
