"""The CRM's LGPD data categories: the records found through the contact's relations
(conversations, messages, leads, orders, consents) and the contact's identity itself, last.
Registered in core.lgpd_registry (see its module doc for the order)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import models
from django.db.models import F, Func, Q, QuerySet, Value
from django.utils import timezone

from core.lgpd_registry import Category, Rows, register
from core.lgpd_subject import Subject, SubjectContact
from crm.models import (
    ConsentRecord,
    Contact,
    ContactIdentity,
    Conversation,
    Lead,
    LeadActivity,
    Message,
    Order,
    phone_digits,
)


@register
class ConversationCategory(Category):
    name = "conversations"
    order = 10
    covers = {Conversation: ("external_chat_id",)}
    context_fields = {Conversation: ("channel", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return Conversation.objects.filter(contact_id=subject.contact.pk)


@register
class MessageCategory(Category):
    """Messages are kept (the conversation still makes sense) with personal data scrubbed."""

    name = "messages"
    order = 20
    covers = {Message: ("body", "media_urls", "error_message", "external_id")}
    context_fields = {Message: ("conversation_id", "direction", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return Message.objects.filter(conversation__contact_id=subject.contact.pk)

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        super().redact_row(row, fields, subject)
        assert isinstance(row, Message)
        row.external_id = ""  # the channel's id embeds the chat id, a phone number (WhatsApp)


@register
class LeadCategory(Category):
    name = "lead_activities"
    order = 30
    covers = {Lead: ("name", "close_reason"), LeadActivity: ("note",)}
    context_fields = {
        Lead: ("pipeline_id", "stage_id", "source", "status", "value_cents", "created_at"),
        LeadActivity: ("lead_id", "kind", "created_at"),
    }

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        if model is Lead:
            return Lead.objects.filter(contact_id=subject.contact.pk)
        return LeadActivity.objects.filter(lead__contact_id=subject.contact.pk)


@register
class OrderCategory(Category):
    """Orders keep their money (amounts, items) and lose the customer's identity."""

    name = "orders"
    order = 40
    covers = {Order: ("customer_name", "customer_email", "customer_phone", "shipping_address")}
    context_fields = {Order: ("number", "status", "total_cents", "currency", "items", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return subject_orders(subject.contact)

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        for name in fields:
            setattr(row, name, "")


def subject_orders(contact: SubjectContact) -> QuerySet[Order]:
    """The contact's orders: linked to it, or holding its e-mail, phone or full name as the
    customer's (an order placed through the API or the shop without a link to the contact).
    The e-mails and phones are the contact's own and its identities' (what a merge brought in).

    Found with strong identifiers only (core.lgpd_subject): the e-mail (case-insensitive), the
    phone's digits (with or without +55), the full name (two words at least, exact); never a
    first name or a surname alone."""
    match = Q(contact_id=contact.pk)
    keys = ContactIdentity.objects.filter(contact_id=contact.pk).values_list("kind", "value")
    emails = {contact.email.strip()} | {v for k, v in keys if k == ContactIdentity.Kind.EMAIL}
    for email in emails - {""}:
        match |= Q(customer_email__iexact=email)
    phones = {contact.phone} | {v for k, v in keys if k == ContactIdentity.Kind.PHONE}
    if variants := [digits for phone in phones for digits in phone_digits(phone)]:
        match |= Q(customer_phone_digits__in=variants)
    name = " ".join(contact.name.split())
    if len(name.split(" ")) >= 2:
        match |= Q(customer_name__iexact=name)
    digits = Func(
        F("customer_phone"), Value(r"\D"), Value(""), Value("g"), function="regexp_replace"
    )
    return (
        Order.objects.filter(organization_id=contact.organization_id)
        .annotate(customer_phone_digits=digits)
        .filter(match)
    )


@register
class ConsentCategory(Category):
    """Consents keep what was granted and when (proof), and lose the evidence's personal data."""

    name = "consents"
    order = 50
    covers = {ConsentRecord: ("evidence",)}
    context_fields = {ConsentRecord: ("consent_type", "granted", "source", "recorded_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return ConsentRecord.objects.filter(contact_id=subject.contact.pk)


@register
class IdentityCategory(Category):
    """The contact's identifiers (phones, e-mails, channel ids, its own and a merge's):
    deleted by the redaction, so the redacted person matches no contact again."""

    name = "contact_identities"
    order = 55
    covers = {ContactIdentity: ("value",)}
    context_fields = {ContactIdentity: ("kind", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return ContactIdentity.objects.filter(contact_id=subject.contact.pk)

    def exported(self, row: dict[str, Any]) -> dict[str, Any]:
        if row["kind"] == ContactIdentity.Kind.CPF:  # a lookup key derived from the CPF
            return {**row, "value": "(CPF lookup key, derived from the CPF)"}
        return row

    def redact(self, subject: Subject) -> int:
        deleted, _ = self.rows(subject, ContactIdentity).delete()
        return deleted


@register
class ContactCategory(Category):
    """The contact's identity: removed outright (the row stays, anonymized, for the history).

    Last of all categories: the subject's identifiers were captured before anything changed,
    and the other categories find their rows through the contact.
    """

    name = "contact"
    order = 1000
    covers = {Contact: ("name", "phone", "email", "cpf_encrypted", "cpf_digest")}
    context_fields = {Contact: ("created_at", "anonymized_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return Contact.objects.filter(pk=subject.contact.pk)

    def exported(self, row: dict[str, Any]) -> dict[str, Any]:
        shown = dict(row)
        shown.pop("cpf_encrypted")
        shown.pop("cpf_digest")  # a lookup key derived from the CPF shown next to it
        shown["cpf"] = Contact(cpf_encrypted=row["cpf_encrypted"]).cpf
        return shown

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        assert isinstance(row, Contact)
        row.name = row.phone = row.email = row.cpf_encrypted = row.cpf_digest = ""

    def redact(self, subject: Subject) -> int:
        changed = super().redact(subject)
        Contact.objects.filter(pk=subject.contact.pk, anonymized_at__isnull=True).update(
            anonymized_at=timezone.now()
        )
        return changed
