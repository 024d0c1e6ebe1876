"""Data-subject requests: what was asked, for whom, and timestamps that prove the timeline."""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models
from django.db.models import Q


class DataRequest(models.Model):
    """An `access` (export) or `redact` (anonymization) request for one contact.

    Created by the API, the admin or a command (`lgpd.services.data_request_create`), which emits
    `lgpd.data_request_received`; the delayed consumers (`lgpd/handlers.py`) do the work and set
    the timestamps. No personal data is stored here: only ids and times.
    """

    class Kind(models.TextChoices):
        ACCESS = "access"
        REDACT = "redact"

    class Status(models.TextChoices):
        RECEIVED = "received"  # waiting for its scheduled run (D+7 / D+15)
        COMPLETED = "completed"  # export generated, or redaction applied

    class Channel(models.TextChoices):
        API = "api"
        ADMIN = "admin"
        COMMAND = "command"
        NUVEMSHOP = "nuvemshop"  # the shop's LGPD webhooks (customers/redact, data_request)

    class ExportDeleted(models.TextChoices):
        REDACTED = "redacted"  # erased by a later redaction of the same subject
        EXPIRED = "expired"  # its download period (EXPORT_LINK_DAYS) ended

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        "core.Organization", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    contact = models.ForeignKey(
        "crm.Contact", on_delete=models.PROTECT, related_name="data_requests"
    )
    kind = models.TextField(choices=Kind.choices)
    channel = models.TextField(choices=Channel.choices)
    status = models.TextField(choices=Status.choices, default=Status.RECEIVED)
    requested_by = models.CharField(max_length=200)  # actor: API key, admin user, command
    received_at = models.DateTimeField()
    # Export (access): the private file, its SHA-256 and when its download period ends.
    export_name = models.TextField(blank=True, default="")
    export_sha256 = models.CharField(max_length=64, blank=True, default="")
    export_generated_at = models.DateTimeField(null=True, blank=True)
    export_expires_at = models.DateTimeField(null=True, blank=True)
    export_deleted_at = models.DateTimeField(null=True, blank=True)
    export_deleted_reason = models.TextField(choices=ExportDeleted.choices, blank=True, default="")
    # The single-use download link e-mailed to the data subject: only its SHA-256 is kept.
    export_link_hash = models.CharField(max_length=64, blank=True, default="")
    export_link_sent_at = models.DateTimeField(null=True, blank=True)
    export_link_used_at = models.DateTimeField(null=True, blank=True)
    redacted_at = models.DateTimeField(null=True, blank=True)
    # The daily SLA check: warned past the due date, escalated near the legal deadline (once each).
    sla_warned_at = models.DateTimeField(null=True, blank=True)
    sla_escalated_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind__in=["access", "redact"]), name="lgpd_request_kind_valid"
            ),
        ]
        indexes = [
            # API list: an organization's requests, newest first (keyset pages).
            models.Index(
                fields=["organization", "-received_at", "-id"], name="lgpd_request_org_idx"
            ),
            # The daily SLA check: open requests by age.
            models.Index(
                fields=["received_at"], condition=Q(status="received"), name="lgpd_request_open_idx"
            ),
            # The expiry job: exports still stored, by the end of their download period.
            models.Index(
                fields=["export_expires_at"],
                condition=Q(export_deleted_at__isnull=True) & ~Q(export_name=""),
                name="lgpd_request_export_live_idx",
            ),
            # The e-mailed link: found by the hash of its token.
            models.Index(
                fields=["export_link_hash"],
                condition=~Q(export_link_hash=""),
                name="lgpd_request_link_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"


class RedactedIdentifier(models.Model):
    """A tombstone of a redacted subject: a keyed digest (core.crypto.blind_index) of each of
    their identifiers (e-mail, phone, CPF), so a system that still holds them (the shop's orders)
    cannot bring them back: an import finding one stores the record without the identity.

    Not the data itself: the digest cannot be read back without SECRET_KEY, and it is only
    compared with what an import brings. Kept as long as the redaction must be honoured.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(
        "core.Organization", on_delete=models.CASCADE, related_name="+"
    )
    digest = models.CharField(max_length=64)
    request = models.ForeignKey(DataRequest, on_delete=models.SET_NULL, null=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "digest"], name="lgpd_tombstone_uniq")
        ]
