"""Core records: tenants and the minimal CRM entities the bus talks about.

`PERSONAL_DATA` on a model names its fields that may hold a data subject's personal data; every
one of them must be covered by an LGPD data category registered in its app's `personal_data`
module (`core/lgpd_registry.py`), which a test checks.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.contrib.postgres.fields import ArrayField
from django.db import models

from core.flags import validate_feature_flags

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
    # Per-tenant feature flags (seed 001 §5.5), {name: bool}; read through core.flags.enabled,
    # names and defaults in core.flags.FLAGS (an absent name has its default).
    feature_flags = models.JSONField(
        default=dict,
        db_default=models.Value({}, output_field=models.JSONField()),
        blank=True,
        validators=[validate_feature_flags],
        help_text="JSON object of flag: true/false; flags not listed keep their default.",
    )

    objects = OrganizationManager()

    class Meta:
        db_table = "deskcomm_organization"  # kept from the deskcomm app
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AuditLog(models.Model):
    """Operator actions (reprocess, discard, resend, rotate secret, LGPD...): who, when, what, why.

    Append-only: written by services through `core.audit.record`, read-only in the admin.
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
        db_table = "deskcomm_auditlog"  # kept from the deskcomm app
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
        db_table = "deskcomm_apikey"  # kept from the deskcomm app
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
        db_table = "deskcomm_idempotencykey"  # kept from the deskcomm app
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
    conditional upsert per request moves it (core/rate_limits.py). The table is UNLOGGED
    (migration 0004): no WAL flush per request, and losing it in a crash only resets allowances.
    """

    key = models.CharField(max_length=200, primary_key=True)
    tat = models.DateTimeField()

    class Meta:
        db_table = "deskcomm_throttlestate"  # kept from the deskcomm app

    def __str__(self) -> str:
        return f"{self.key} until {self.tat:%Y-%m-%d %H:%M:%S}"


class WorkerProcess(models.Model):
    """A long-running process (drain, webhook sender, jobs, scheduler) as the console shows it:
    registered at start, heartbeated by the process itself (`core.workers.Presence`)."""

    id = models.CharField(primary_key=True, max_length=200)  # host:pid:random
    kind = models.CharField(max_length=60)  # the command: drain_events, deliver_webhooks, ...
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    version = models.CharField(max_length=100, blank=True)
    pumps = models.CharField(max_length=200, blank=True)  # what it runs: "drain, relay"
    concurrency = models.IntegerField(default=1)
    in_flight = models.IntegerField(default=0)
    leader = models.BooleanField(default=False)  # the scheduler holding the leader lock
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    last_claim_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)  # a clean exit said so
    # What each pump runs at once ({"drain": 2, "relay": 1}); `concurrency` is their sum.
    threads = models.JSONField(default=dict, blank=True)
    # What the process says it does: "running", or "quiet" (claims nothing more, as asked).
    mode = models.CharField(max_length=20, default="running")
    # What an operator asked of it from the console (core.workers.ask): "", "quiet" or "stop".
    command = models.CharField(max_length=10, blank=True, default="")
    command_by = models.CharField(max_length=200, blank=True, default="")
    command_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "core_worker_process"
        indexes = [models.Index(fields=["heartbeat_at"], name="worker_heartbeat_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"


class StaffOrganization(models.Model):
    """Binds a staff user to an organization whose rows the admin shows them (core.admin_scope).

    A staff user who is neither a superuser nor holds `core.all_organizations` sees, in every
    admin screen, only the rows of the organization they work in now: one of these, chosen at
    /admin/organization/ (the first by name until they choose). The database enforces it: their
    admin requests run with that tenant's row-level security scope, not the bypass.
    """

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(
        "auth.User", on_delete=models.CASCADE, related_name="staff_organizations"
    )
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "core_staff_organization"
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="staff_org_unique")
        ]
        permissions = [
            ("all_organizations", "Platform operator: sees every organization in the admin"),
        ]
        verbose_name = "staff organization"

    def __str__(self) -> str:
        return f"{self.user_id} in {self.organization_id}"
