"""The AI app's LGPD data category: what the AI derived from the subject (registered in
core.lgpd_registry)."""

from __future__ import annotations

from django.db import models

from ai.models import Chunk
from core.lgpd_registry import Category, Rows, register
from core.lgpd_subject import Subject
from crm.models import Message


@register
class AiDerivedCategory(Category):
    """What the AI derived from the subject: each message's sentiment (exported, nulled by the
    redaction) and the RAG chunks made from the contact's data (exported, deleted). The AI app
    stores no prompts or model replies of its own (zero retention): replies are messages."""

    name = "ai_derived"
    order = 100
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
            conversation__contact_id=subject.contact.pk, sentiment__isnull=False
        )

    def redact(self, subject: Subject) -> int:
        scored = self.rows(subject, Message).update(sentiment=None, sentiment_score=None)
        deleted, _ = self.rows(subject, Chunk).delete()
        return scored + deleted
