"""Core records: tenants and the minimal CRM entities the bus talks about."""

from __future__ import annotations

import uuid

from django.db import models


class Organization(models.Model):
    """A tenant. Everything on the bus belongs to exactly one organization."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Contact(models.Model):
    """A person the organization talks to (minimal: what the workers and LGPD need)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="contacts"
    )
    name = models.CharField(max_length=200, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    email = models.EmailField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name or str(self.id)


class Lead(models.Model):
    """A sales opportunity moving through pipeline stages.

    A database trigger (migration 0002) emits `lead.stage_changed` through the `emit_event` SQL
    function whenever `stage_id` changes, in the same transaction as the update.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="leads")
    contact = models.ForeignKey(
        Contact, on_delete=models.SET_NULL, null=True, blank=True, related_name="leads"
    )
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=50, default="manual")
    pipeline_id = models.CharField(max_length=64, default="default")
    stage_id = models.CharField(max_length=64, default="new")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name


class AuditLog(models.Model):
    """Operator actions (reprocess, discard, resend, rotate secret, LGPD...): who, when, what, why.

    Append-only: written by services through `deskcomm.audit.record`, read-only in the admin.
    """

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(
        Organization, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Who: a user (admin), an API key label, or a system actor ("system:cron") as text.
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=100)  # e.g. "delivery.reprocess", "delivery.discard"
    target_type = models.CharField(max_length=100)  # e.g. "eventbus.delivery"
    target_id = models.CharField(max_length=100)
    reason = models.TextField(blank=True, default="")
    request_id = models.CharField(max_length=100, blank=True, default="")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # Correlation view: everything one request caused.
            models.Index(fields=["request_id", "created_at"], name="audit_request_idx"),
            # History of one object (delivery, subscription, data request...).
            models.Index(
                fields=["target_type", "target_id", "-created_at"], name="audit_target_idx"
            ),
            models.Index(fields=["-created_at"], name="audit_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target_type}:{self.target_id}"
