"""CRM reads shared by the apps above (integrations match their customers with the CRM's rule)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

from django.db.models import F, Func, Q, QuerySet, Value

from core import crypto
from crm.identity import normalize_email, normalize_phone
from crm.models import Contact, Conversation, Lead, LeadActivity, cpf_digits, phone_digits


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


def contact_get(organization_id: uuid.UUID, contact_id: uuid.UUID) -> Contact | None:
    """The organization's contact, or None (another organization's id is no contact here)."""
    return Contact.objects.filter(organization_id=organization_id, pk=contact_id).first()


def contacts_page(
    *,
    organization_id: uuid.UUID,
    before: tuple[dt.datetime, uuid.UUID] | None,
    limit: int,
    phone: str = "",
    email: str = "",
    include_merged: bool = False,
) -> list[Contact]:
    """Up to `limit` contacts of the organization, newest first, older than `before`; by
    phone or e-mail (their normalized identity, any spelling); merged-away ones left out
    unless `include_merged`."""
    rows: QuerySet[Contact] = Contact.objects.filter(organization_id=organization_id)
    if not include_merged:
        rows = rows.filter(merged_into__isnull=True)
    if phone:
        rows = rows.filter(identities__kind="phone", identities__value=normalize_phone(phone))
    if email:
        rows = rows.filter(identities__kind="email", identities__value=normalize_email(email))
    if before is not None:
        stamp, ident = before
        rows = rows.filter(Q(created_at__lt=stamp) | Q(created_at=stamp, id__lt=ident))
    return list(rows.order_by("-created_at", "-id")[:limit])


def lead_get(*, organization_id: uuid.UUID, lead_id: uuid.UUID) -> Lead | None:
    """The organization's live (not deleted) lead; None for another tenant's or a deleted one."""
    return Lead.objects.filter(
        organization_id=organization_id, pk=lead_id, deleted_at__isnull=True
    ).first()


def leads_page(
    *,
    organization_id: uuid.UUID,
    before: tuple[dt.datetime, uuid.UUID] | None,
    limit: int,
    filters: Mapping[str, Any] | None = None,
) -> list[Lead]:
    """Up to `limit` live leads, newest first, older than `before` (created_at, id); `filters`:
    status, stage_id, pipeline_id, owner_id, contact_id (equality)."""
    rows = Lead.objects.filter(organization_id=organization_id, deleted_at__isnull=True)
    rows = rows.filter(**dict(filters or {}))
    if before is not None:
        stamp, ident = before
        rows = rows.filter(Q(created_at__lt=stamp) | Q(created_at=stamp, id__lt=ident))
    return list(rows.order_by("-created_at", "-id")[:limit])


def lead_activities(*, lead: Lead, before_id: int | None, limit: int) -> list[LeadActivity]:
    """Up to `limit` activities of the lead, newest first, with ids below `before_id`."""
    rows = LeadActivity.objects.filter(lead=lead)
    if before_id is not None:
        rows = rows.filter(id__lt=before_id)
    return list(rows.order_by("-id")[:limit])


def contact_conversation(*, contact: Contact, channel: str) -> Conversation | None:
    """The contact's conversation on `channel` with the latest inbound message (where a reply
    goes), else its newest one; None when the contact has none there."""
    return (
        Conversation.objects.filter(contact=contact, channel=channel)
        .order_by(F("last_inbound_at").desc(nulls_last=True), "-created_at")
        .first()
    )
