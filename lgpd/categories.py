"""Data categories: one class per kind of personal data, each able to export AND redact it.

Export and redaction of a category find the subject's rows with the same `rows()` query, so what
the subject receives and what is erased can never disagree. `covers` names the personal fields
(`PERSONAL_DATA` on the models) a category is responsible for; a test checks that every marked
field is covered by some category. `REGISTRY` is the ordered list the services walk.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from django.db import models
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast
from django.utils import timezone

from ai.models import Chunk
from core.models import AuditLog, IdempotencyKey
from crm.models import ConsentRecord, Contact, Conversation, Lead, LeadActivity, Message, Order
from eventbus.models import Delivery, DeliveryAttempt, EventLog
from lgpd.subject import Subject
from webhooks.conf import CONSUMER_PREFIX
from webhooks.models import Attempt

Rows = QuerySet[Any]


class Category:
    """A kind of personal data: the rows that belong to (or mention) a subject, and their fields.

    The default redaction scrubs every covered field of every row in place (free text keeps its
    meaning, the subject's identifiers go); categories that must drop identity outright override
    `redact_row`.
    """

    name: ClassVar[str]
    covers: ClassVar[dict[type[models.Model], tuple[str, ...]]]
    # Extra, non-personal fields the export shows for context (ids, timestamps, amounts).
    context_fields: ClassVar[dict[type[models.Model], tuple[str, ...]]] = {}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        raise NotImplementedError

    def export(self, subject: Subject) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for model, fields in self.covers.items():
            shown = ("pk", *self.context_fields.get(model, ()), *fields)
            for row in self.rows(subject, model).order_by("pk").values(*shown):
                out.append({"record": model._meta.label, **self.exported(row)})
        return out

    def exported(self, row: dict[str, Any]) -> dict[str, Any]:
        return row

    def redact(self, subject: Subject) -> int:
        changed = 0
        for model, fields in self.covers.items():
            for row in self.rows(subject, model).order_by("pk"):
                before = [getattr(row, name) for name in fields]
                self.redact_row(row, fields, subject)
                if before != [getattr(row, name) for name in fields]:
                    row.save(update_fields=list(fields))
                    changed += 1
        return changed

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        for name in fields:
            setattr(row, name, scrubbed(getattr(row, name), subject))


def scrubbed(value: Any, subject: Subject) -> Any:
    """A text or JSON value without the subject's identifiers."""
    if isinstance(value, str):
        return subject.scrub(value)
    return subject.scrub_json(value)


def mentioning(queryset: Rows, fields: Iterable[str], subject: Subject) -> Rows:
    """Rows where any of the fields (text or JSON, as text) contains a strong identifier."""
    if not subject.identifiers:
        return queryset.none()
    annotations = {f"_lgpd_{name}": Cast(name, TextField()) for name in fields}
    match = Q()
    for alias in annotations:
        for value in subject.identifiers:
            match |= Q(**{f"{alias}__icontains": value})
    return queryset.annotate(**annotations).filter(match)


class ContactCategory(Category):
    """The contact's identity: removed outright (the row stays, anonymized, for the history)."""

    name = "contact"
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


class ConversationCategory(Category):
    name = "conversations"
    covers = {Conversation: ("external_chat_id",)}
    context_fields = {Conversation: ("channel", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return Conversation.objects.filter(contact=subject.contact)


class MessageCategory(Category):
    """Messages are kept (the conversation still makes sense) with personal data scrubbed."""

    name = "messages"
    covers = {Message: ("body", "media_urls", "error_message", "external_id")}
    context_fields = {Message: ("conversation_id", "direction", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return Message.objects.filter(conversation__contact=subject.contact)

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        super().redact_row(row, fields, subject)
        assert isinstance(row, Message)
        row.external_id = ""  # the channel's id embeds the chat id, a phone number (WhatsApp)


class LeadCategory(Category):
    name = "lead_activities"
    covers = {Lead: ("name",), LeadActivity: ("note",)}
    context_fields = {
        Lead: ("pipeline_id", "stage_id", "source", "created_at"),
        LeadActivity: ("lead_id", "kind", "created_at"),
    }

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        if model is Lead:
            return Lead.objects.filter(contact=subject.contact)
        return LeadActivity.objects.filter(lead__contact=subject.contact)


class OrderCategory(Category):
    """Orders keep their money (amounts, items) and lose the customer's identity."""

    name = "orders"
    covers = {Order: ("customer_name", "customer_email", "customer_phone", "shipping_address")}
    context_fields = {Order: ("number", "status", "total_cents", "currency", "items", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return Order.objects.filter(contact=subject.contact)

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        for name in fields:
            setattr(row, name, "")


class ConsentCategory(Category):
    """Consents keep what was granted and when (proof), and lose the evidence's personal data."""

    name = "consents"
    covers = {ConsentRecord: ("evidence",)}
    context_fields = {ConsentRecord: ("consent_type", "granted", "source", "recorded_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        return ConsentRecord.objects.filter(contact=subject.contact)


class EventCategory(Category):
    """Events about the subject's records, or whose payload/metadata mentions the subject.

    Pending deliveries (webhooks included) read the payload from the event at send time, so
    scrubbing the event also scrubs what is still to be sent.
    """

    name = "events"
    covers = {EventLog: ("payload", "metadata", "last_error")}
    context_fields = {EventLog: ("event_type", "entity_kind", "entity_id", "status", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        scoped = EventLog.objects.filter(organization_id=subject.contact.organization_id)
        about = scoped.filter(entity_id__in=subject.entity_ids).values("pk")
        mention = mentioning(scoped, self.covers[EventLog], subject).values("pk")
        return EventLog.objects.filter(Q(pk__in=about) | Q(pk__in=mention))


class WebhookCategory(Category):
    """Webhook deliveries of the subject's events and every log text that mentions the subject."""

    name = "webhook_deliveries"
    covers = {
        Attempt: ("response_excerpt", "error"),
        Delivery: ("last_error",),
        DeliveryAttempt: ("error",),
    }
    context_fields = {
        Attempt: ("delivery_id", "attempt", "status_code", "created_at"),
        Delivery: ("event_id", "consumer", "status", "attempts", "created_at"),
        DeliveryAttempt: ("delivery_id", "attempt", "outcome", "created_at"),
    }

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        events = EventCategory().rows(subject, EventLog).values("pk")
        scoped, mine = self._scoped(model, subject.contact.organization_id, events)
        mention = mentioning(scoped, self.covers[model], subject).values("pk")
        return model._default_manager.filter(Q(pk__in=mine.values("pk")) | Q(pk__in=mention))

    @staticmethod
    def _scoped(model: type[models.Model], organization_id: Any, events: Rows) -> tuple[Rows, Rows]:
        """(the organization's rows, those belonging to the subject's events) of one model."""
        if model is Attempt:
            attempts: Rows = Attempt.objects.filter(organization_id=organization_id)
            return attempts, attempts.filter(delivery__event_id__in=events)
        if model is Delivery:
            deliveries: Rows = Delivery.objects.filter(organization_id=organization_id)
            mine = deliveries.filter(event_id__in=events, consumer__startswith=CONSUMER_PREFIX)
            return deliveries, mine
        logged: Rows = DeliveryAttempt.objects.filter(delivery__organization_id=organization_id)
        return logged, logged.filter(delivery__event_id__in=events)


class AuditCategory(Category):
    """The audit trail about the subject's records and any audit text that mentions them."""

    name = "audit_trail"
    covers = {AuditLog: ("reason", "details")}
    context_fields = {
        AuditLog: ("created_at", "actor", "action", "target_type", "target_id", "request_id")
    }

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        scoped = AuditLog.objects.filter(organization_id=subject.contact.organization_id)
        targets = [str(ident) for ident in subject.entity_ids]
        mention = mentioning(scoped, self.covers[AuditLog], subject).values("pk")
        return AuditLog.objects.filter(
            Q(pk__in=scoped.filter(target_id__in=targets).values("pk")) | Q(pk__in=mention)
        )


class IdempotencyCategory(Category):
    """Stored API responses (Idempotency-Key replays) that echo the subject's data."""

    name = "api_responses"
    covers = {IdempotencyKey: ("response",)}
    context_fields = {IdempotencyKey: ("scope", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        scoped = IdempotencyKey.objects.filter(organization_id=subject.contact.organization_id)
        return mentioning(scoped, self.covers[IdempotencyKey], subject)


class AiDerivedCategory(Category):
    """What the AI derived from the subject: each message's sentiment (exported, nulled by the
    redaction) and the RAG chunks made from the contact's data (exported, deleted). The AI app
    stores no prompts or model replies of its own (zero retention): replies are messages."""

    name = "ai_derived"
    covers = {Message: ("sentiment", "sentiment_score"), Chunk: ("content",)}
    context_fields = {
        Message: ("conversation_id", "created_at"),
        Chunk: ("source_kind", "source_id", "created_at"),
    }

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        if model is Chunk:
            return Chunk.objects.filter(
                organization_id=subject.contact.organization_id, contact_id=subject.contact.pk
            )
        return Message.objects.filter(
            conversation__contact=subject.contact, sentiment__isnull=False
        )

    def redact(self, subject: Subject) -> int:
        scored = self.rows(subject, Message).update(sentiment=None, sentiment_score=None)
        deleted, _ = self.rows(subject, Chunk).delete()
        return scored + deleted


# Order matters for redaction: records found through the contact's relations first, the identity
# last (the subject's identifiers were captured before anything changed).
REGISTRY: tuple[Category, ...] = (
    ConversationCategory(),
    MessageCategory(),
    LeadCategory(),
    OrderCategory(),
    ConsentCategory(),
    EventCategory(),
    WebhookCategory(),
    AuditCategory(),
    IdempotencyCategory(),
    AiDerivedCategory(),
    ContactCategory(),
)


def covered_fields() -> set[tuple[str, str]]:
    """(model label, field) for every personal field some category is responsible for."""
    return {
        (model._meta.label, name)
        for category in REGISTRY
        for model, fields in category.covers.items()
        for name in fields
    }
