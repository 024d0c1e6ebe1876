"""The webhooks' LGPD data category: the deliveries of the subject's events and every delivery
log text that mentions the subject (registered in core.lgpd_registry)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q

from core.lgpd_registry import Category, Rows, mentioning, register
from core.lgpd_subject import Subject
from eventbus.personal_data import DELIVERY_ATTEMPT_FIELDS, DELIVERY_FIELDS, EventCategory
from eventbus.store.models import Delivery, DeliveryAttempt, EventLog
from webhooks.conf import CONSUMER_PREFIX
from webhooks.models import Attempt


@register
class WebhookCategory(Category):
    """Webhook deliveries of the subject's events and every log text that mentions the subject."""

    name = "webhook_deliveries"
    order = 70
    covers = {
        Attempt: ("response_excerpt", "error"),
        Delivery: DELIVERY_FIELDS,
        DeliveryAttempt: DELIVERY_ATTEMPT_FIELDS,
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
