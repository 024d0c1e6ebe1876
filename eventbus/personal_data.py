"""The bus's LGPD data category: the events about the subject or that mention them (registered
in core.lgpd_registry). The personal fields of deliveries and their attempts are named here too:
the webhooks' category scrubs those rows (webhooks.personal_data) and the archive redaction the
same fields in archived days (lgpd.archives)."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from core.lgpd_registry import Category, Rows, mentioning, register
from core.lgpd_subject import Subject
from eventbus.store.models import EventLog

DELIVERY_FIELDS: tuple[str, ...] = ("last_error",)
DELIVERY_ATTEMPT_FIELDS: tuple[str, ...] = ("error", "traceback")


@register
class EventCategory(Category):
    """Events about the subject's records, or whose payload/metadata mentions the subject.

    Pending deliveries (webhooks included) read the payload from the event at send time, so
    scrubbing the event also scrubs what is still to be sent.
    """

    name = "events"
    order = 60
    covers = {EventLog: ("payload", "metadata", "last_error")}
    context_fields = {EventLog: ("event_type", "entity_kind", "entity_id", "status", "created_at")}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        scoped = EventLog.objects.filter(organization_id=subject.contact.organization_id)
        about = scoped.filter(entity_id__in=subject.entity_ids).values("pk")
        mention = mentioning(scoped, self.covers[EventLog], subject).values("pk")
        return EventLog.objects.filter(Q(pk__in=about) | Q(pk__in=mention))
