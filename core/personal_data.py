"""Core's LGPD data categories: the audit trail and the stored API responses (registered in
core.lgpd_registry, like every app's `personal_data` module)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.lgpd_registry import Category, Rows, mentioning, register
from core.lgpd_subject import Subject
from core.models import AuditLog, IdempotencyKey


@register
class AuditCategory(Category):
    """The audit trail about the subject's records and any audit text that mentions them."""

    name = "audit_trail"
    order = 80
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


@register
class IdempotencyCategory(Category):
    """Stored API responses (Idempotency-Key replays) that echo the subject's data."""

    name = "api_responses"
    order = 90
    covers = {IdempotencyKey: ("response",)}
    context_fields = {IdempotencyKey: ("scope", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        scoped = IdempotencyKey.objects.filter(organization_id=subject.contact.organization_id)
        return mentioning(scoped, self.covers[IdempotencyKey], subject)
