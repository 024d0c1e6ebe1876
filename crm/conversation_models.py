"""The records of the conversation lifecycle's consumers (imported by crm.models).

- `HandoffRouting`: who takes an organization's handed-off conversations (a fixed owner, or
  round robin over its agents) and the round robin's position.
- `AgentNotification`: the admin's notification list (a handoff, a lead assigned, an SLA
  breach), one per (source event, recipient).
- `TemplateSuggestion`: a template message suggested to the agent where a free-form one cannot
  be sent (the 24-hour window closed; template-suggester, the AI responder).
- `ConversationSla`: a conversation's first-response and resolution deadlines and breaches
  (sla-tracker).
- `CsatRequest`: the CSAT question sent after a resolution or a fulfilment, once per cause.
- `AnalyticsDaily` / `AnalyticsCounted`: per-organization daily counters, and the events already
  counted (analytics-aggregator: a redelivery does not count twice).
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models

from core.models import Organization


class HandoffRouting(models.Model):
    """An organization's handoff routing: `owner` takes every handoff when set, else the
    organization's agents (staff users bound to it, core.StaffOrganization) in turn."""

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="Takes every handed-off conversation; empty: round robin over the agents.",
    )
    last_assigned = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "handoff routing"
        verbose_name_plural = "handoff routing"

    def __str__(self) -> str:
        return f"handoff routing of {self.organization_id}"


class AgentNotification(models.Model):
    """Something an agent should see in the admin (also e-mailed when they have an address)."""

    class Kind(models.TextChoices):
        HANDOFF = "handoff"
        LEAD_ASSIGNED = "lead_assigned"
        SLA_BREACH = "sla_breach"

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    target_type = models.CharField(max_length=32)  # "conversation", "lead"
    target_id = models.CharField(max_length=64)
    text = models.CharField(max_length=300)  # ids and reasons, no customer data
    source_event_id = models.UUIDField()
    emailed_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source_event_id", "kind"], name="agent_notification_once"
            )
        ]
        indexes = [models.Index(fields=["recipient", "read_at"], name="agent_notif_unread_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.target_type} {self.target_id}"


class TemplateSuggestion(models.Model):
    """A template message suggested to the agent for a conversation whose window closed."""

    class Reason(models.TextChoices):
        WINDOW_EXPIRED = "window_expired"  # system.window_24h_expired
        OUTSIDE_WINDOW = "outside_window"  # the AI responder: a message answered too late

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        "crm.Conversation", on_delete=models.CASCADE, related_name="template_suggestions"
    )
    reason = models.CharField(max_length=32, choices=Reason.choices)
    template = models.TextField()
    source_event_id = models.UUIDField(unique=True)
    used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.reason} {self.conversation_id}"


class ConversationSla(models.Model):
    """A conversation's service levels: when it should get its first answer and be resolved,
    when it did, and when a deadline was missed (`conversation.sla_breached`, once each)."""

    conversation = models.OneToOneField(
        "crm.Conversation", on_delete=models.CASCADE, primary_key=True, related_name="sla"
    )
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    opened_at = models.DateTimeField()
    first_response_due_at = models.DateTimeField()
    first_response_at = models.DateTimeField(null=True, blank=True)
    first_response_breached_at = models.DateTimeField(null=True, blank=True)
    resolution_due_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_breached_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "conversation SLA"
        indexes = [
            models.Index(
                fields=["first_response_due_at"],
                condition=models.Q(
                    first_response_at__isnull=True, first_response_breached_at__isnull=True
                ),
                name="sla_first_response_due_idx",
            ),
            models.Index(
                fields=["resolution_due_at"],
                condition=models.Q(resolved_at__isnull=True, resolution_breached_at__isnull=True),
                name="sla_resolution_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"SLA {self.conversation_id}"


class CsatRequest(models.Model):
    """A CSAT question sent (or skipped: outside the window) for one cause, once."""

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey("crm.Conversation", on_delete=models.CASCADE, related_name="+")
    message = models.ForeignKey(
        "crm.Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    cause = models.CharField(max_length=64)  # the event type
    source_event_id = models.UUIDField(unique=True)
    skipped = models.CharField(max_length=32, blank=True, default="")  # e.g. "window_closed"
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"CSAT {self.conversation_id}"


class AnalyticsDaily(models.Model):
    """One counter of one organization for one day (UTC), e.g. `message.received` = 42."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    metric = models.CharField(max_length=64)
    count = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "daily analytics counter"
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "day", "metric"], name="analytics_daily_uniq"
            )
        ]

    def __str__(self) -> str:
        return f"{self.day} {self.metric}={self.count}"


class AnalyticsCounted(models.Model):
    """An event the aggregator has counted: its redelivery counts nothing (pruned after
    `CRM["ANALYTICS_DEDUP_DAYS"]`)."""

    event_id = models.UUIDField(primary_key=True, default=uuid.uuid4)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    counted_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return str(self.event_id)
