"""Core records: tenants and the minimal CRM entities the bus talks about.

`PERSONAL_DATA` on a model names its fields that may hold a data subject's personal data; every
one of them must be covered by an LGPD data category (`lgpd/categories.py`), which a test checks.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

# The tenant of the platform's own events (cron runs): created by a data migration, and again on
# demand (`Organization.objects.system()`) since test flushes and restores may remove it.
SYSTEM_ORGANIZATION_ID = uuid.UUID("00000000-0000-0000-0000-000000000001")
SYSTEM_ORGANIZATION_SLUG = "system"


class OrganizationManager(models.Manager["Organization"]):
    def system(self) -> Organization:
        """The system organization that owns platform events (created if missing)."""
        org, _ = self.get_or_create(
            pk=SYSTEM_ORGANIZATION_ID,
            defaults={"name": "System (platform jobs)", "slug": SYSTEM_ORGANIZATION_SLUG},
        )
        return org


class Organization(models.Model):
    """A tenant. Everything on the bus belongs to exactly one organization."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = OrganizationManager()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Contact(models.Model):
    """A person the organization talks to (minimal: what the workers and LGPD need).

    The CPF is stored encrypted with its own key context (`deskcomm.crypto`, "cpf"); `cpf` reads
    and writes it in clear. `anonymized_at` is set once by the LGPD redaction.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("name", "phone", "email", "cpf_encrypted")
    CPF_CONTEXT = "cpf"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="contacts"
    )
    name = models.CharField(max_length=200, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    email = models.EmailField(blank=True)
    cpf_encrypted = models.TextField(blank=True, default="")
    anonymized_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name or str(self.id)

    @property
    def cpf(self) -> str:
        from deskcomm import crypto

        return crypto.decrypt(self.CPF_CONTEXT, self.cpf_encrypted) if self.cpf_encrypted else ""

    @cpf.setter
    def cpf(self, value: str) -> None:
        from deskcomm import crypto

        self.cpf_encrypted = crypto.encrypt(self.CPF_CONTEXT, value) if value else ""


class Conversation(models.Model):
    """A conversation with a contact on one channel (e.g. a WhatsApp chat)."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("external_chat_id",)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="conversations"
    )
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="conversations")
    channel = models.CharField(max_length=32, default="whatsapp")
    # The channel's id of the chat, e.g. "5511998765432@c.us": the phone number, so personal.
    external_chat_id = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.channel} {self.id}"


class Message(models.Model):
    """One message of a conversation. Redaction keeps it but scrubs personal data from it."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("body", "media_urls")

    class Direction(models.TextChoices):
        INBOUND = "inbound"
        OUTBOUND = "outbound"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    direction = models.TextField(choices=Direction.choices)
    body = models.TextField(blank=True, default="")
    media_urls = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.direction} {self.id}"


class ConsentRecord(models.Model):
    """A consent given or withdrawn (`lgpd.consent_changed`), with the evidence of it."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("evidence",)

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="consents")
    consent_type = models.CharField(max_length=64)  # e.g. "marketing_whatsapp"
    granted = models.BooleanField()
    source = models.CharField(max_length=64)  # e.g. "whatsapp", "web_form", "api"
    evidence = models.TextField(blank=True, default="")  # what the person said or submitted
    recorded_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["contact", "-recorded_at"], name="consent_contact_idx")]

    def __str__(self) -> str:
        return f"{self.consent_type}={self.granted}"


class Lead(models.Model):
    """A sales opportunity moving through pipeline stages.

    A database trigger (migration 0002) emits `lead.stage_changed` through the `emit_event` SQL
    function whenever `stage_id` changes, in the same transaction as the update.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("name",)  # often the person's name

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


class LeadActivity(models.Model):
    """Something that happened on a lead: a note, a call, a stage change."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("note",)

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    lead = models.ForeignKey(Lead, on_delete=models.CASCADE, related_name="activities")
    kind = models.CharField(max_length=32, default="note")
    note = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "lead activities"

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"


class AuditLog(models.Model):
    """Operator actions (reprocess, discard, resend, rotate secret, LGPD...): who, when, what, why.

    Append-only: written by services through `deskcomm.audit.record`, read-only in the admin.
    The one exception is the LGPD redaction, which scrubs a data subject's personal data from it.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("reason", "details")

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


class ApiKey(models.Model):
    """A credential for the integration API: the organization (tenant) comes from the key.

    The full key (`dck_<prefix>_<secret>`) is shown once at creation; only its SHA-256 is stored.
    The key has 256 bits of entropy, so a fast hash is enough (no slow password hash, since it is
    checked on every request); `prefix` is public, identifies the key and serves the lookup.
    """

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="api_keys"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=32, unique=True)  # the lookup at every request
    secret_hash = models.CharField(max_length=64)  # hex SHA-256 of the whole key
    scopes = ArrayField(models.TextField(), default=list, blank=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # Refreshed at most once a minute (API_KEY_LAST_USED_RESOLUTION_SECONDS), not per request.
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API key"
        ordering = ["organization_id", "name"]

    def __str__(self) -> str:
        return f"{self.name} (dck_{self.prefix})"

    @property
    def display_prefix(self) -> str:
        return f"dck_{self.prefix}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class IdempotencyKey(models.Model):
    """The first response to an API request sent with an `Idempotency-Key` header.

    Within the TTL (24 h) the same key and body replays it; the same key with another body is a
    conflict. The row is written in the same transaction as the work it records, so it exists only
    for work that committed, and the unique constraint makes concurrent duplicates wait and replay.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("response",)  # API responses echo request data

    id = models.BigAutoField(primary_key=True)
    # No index of its own: the unique constraint below leads with it.
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    scope = models.CharField(max_length=100)  # the operation, e.g. "events.create"
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)  # SHA-256 of the canonical JSON body
    status_code = models.SmallIntegerField(null=True)
    response = models.JSONField(null=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "scope", "key"], name="idempotency_key_uniq"
            )
        ]
        indexes = [
            # The purge of expired keys.
            models.Index(fields=["created_at"], name="idempotency_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.scope}:{self.key}"


class ThrottleState(models.Model):
    """Per-client rate limit state (GCRA): one row per client, shared by every web process.

    `tat` ("theoretical arrival time") is when the client's allowance is fully restored; one
    conditional upsert per request moves it (deskcomm/api/throttling.py). The table is UNLOGGED
    (migration 0004): no WAL flush per request, and losing it in a crash only resets allowances.
    """

    key = models.CharField(max_length=200, primary_key=True)
    tat = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.key} until {self.tat:%Y-%m-%d %H:%M:%S}"


class Order(models.Model):
    """A customer order (seed 004, minimal): confirming it emits `order.confirmed` in the same
    transaction, and the broker-run `order-post-worker` does the post-processing.

    The LGPD redaction keeps the money (`total_cents`, `items`) and drops the customer identity.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = (
        "customer_name",
        "customer_email",
        "customer_phone",
        "shipping_address",
    )

    class Status(models.TextChoices):
        DRAFT = "draft"
        CONFIRMED = "confirmed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="orders")
    contact = models.ForeignKey(
        Contact, on_delete=models.SET_NULL, null=True, blank=True, related_name="orders"
    )
    number = models.CharField(max_length=64)
    total_cents = models.BigIntegerField()
    currency = models.CharField(max_length=3, default="BRL")
    items = models.JSONField(default=list, blank=True)  # [{"sku", "name", "qty", "unit_cents"}]
    customer_name = models.CharField(max_length=200, blank=True, default="")
    customer_email = models.CharField(max_length=254, blank=True, default="")
    customer_phone = models.CharField(max_length=32, blank=True, default="")
    shipping_address = models.TextField(blank=True, default="")
    status = models.TextField(choices=Status.choices, default=Status.DRAFT)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # Set once by order-post-worker (the `order.post` phase); never undoes the confirmation.
    post_processed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "number"], name="order_number_uniq")
        ]

    def __str__(self) -> str:
        return self.number


class JobRun(models.Model):
    """One run of a scheduled job: its slot makes a second firing of the same slot a no-op.

    Written only by `deskcomm.cron`; the event log also records each run (`cron.*` events).
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.TextField()
    # Schedule slot (e.g. "2026-01-01T03:00:00+00:00"); null for runs by HTTP or by hand.
    slot = models.TextField(null=True, blank=True)
    trigger = models.TextField()  # schedule | http | manual
    status = models.TextField(choices=Status.choices)
    attempt = models.SmallIntegerField(default=1)
    rows_processed = models.BigIntegerField(null=True, blank=True)
    duration_ms = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # A slot runs once (a failed slot may be retried; see deskcomm.cron.START_RUN_SQL).
            models.UniqueConstraint(
                fields=["job", "slot"], condition=Q(slot__isnull=False), name="jobrun_slot_uniq"
            )
        ]
        indexes = [models.Index(fields=["job", "-started_at"], name="jobrun_job_started_idx")]

    def __str__(self) -> str:
        return f"{self.job} {self.slot or self.trigger} {self.status}"


class DefaultSchedule(models.Model):
    """The default schedule last installed under a name (a fingerprint of the periodic task as
    installed), so `install_schedules` can update defaults without wiping operator edits."""

    name = models.TextField(primary_key=True)
    fingerprint = models.TextField()
    installed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.name
