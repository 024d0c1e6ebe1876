"""Nuvemshop (Tiendanube) records: connected stores, sync cursors, webhook receipts, the shared
rate-limit bucket, health results, customer links and shop-side redactions.

Products and orders live in the CRM (`crm.Product`, `crm.Order`, keyed by the store's ids);
customers become `crm.Contact`s, linked to the store's customer id by `CustomerLink`. The ids of
the shop (store, customer, order) are treated as the catalog treats them: identifiers, not
personal data (the event catalog carries `ns_customer_id`).
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from core import crypto
from core.models import Organization

OAUTH_CONTEXT = "oauth"  # core.crypto context of the stores' access tokens


class Store(models.Model):
    """A Nuvemshop store that installed the app for an organization (one organization per store)."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    class Status(models.TextChoices):
        CONNECTED = "connected"
        UNINSTALLED = "uninstalled"  # app/uninstalled: the token is gone, nothing syncs
        SUSPENDED = "suspended"  # app/suspended (unpaid): API access stopped until app/resumed
        TOKEN_INVALID = "token_invalid"  # noqa: S105  (a status name)  # the API answered 401: reinstall (docs/integrations/nuvemshop.md)
        REDACTED = "redacted"  # store/redact: the store's data was removed

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="nuvemshop_stores"
    )
    ns_store_id = models.BigIntegerField(unique=True)  # the token response's `user_id`
    name = models.CharField(max_length=200, blank=True, default="")
    status = models.TextField(choices=Status.choices, default=Status.CONNECTED)
    status_reason = models.CharField(max_length=200, blank=True, default="")
    scopes = models.CharField(max_length=500, blank=True, default="")
    access_token_encrypted = models.TextField(blank=True, default="")
    token_checked_at = models.DateTimeField(null=True, blank=True)
    webhooks_registered_at = models.DateTimeField(null=True, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    products_count = models.IntegerField(default=0)
    customers_count = models.IntegerField(default=0)
    orders_count = models.IntegerField(default=0)
    carts_polled_at = models.DateTimeField(null=True, blank=True)
    installed_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["status"], name="ns_store_status_idx")]
        # The admin's "Connect a store" page (nuvemshop.views.connect).
        permissions = [("connect_store", "Can connect a Nuvemshop store")]

    def __str__(self) -> str:
        return self.name or f"store {self.ns_store_id}"

    @property
    def access_token(self) -> str:
        if not self.access_token_encrypted:
            return ""
        return crypto.decrypt(OAUTH_CONTEXT, self.access_token_encrypted)

    @access_token.setter
    def access_token(self, value: str) -> None:
        self.access_token_encrypted = crypto.encrypt(OAUTH_CONTEXT, value) if value else ""

    @property
    def syncing(self) -> bool:
        return self.status == self.Status.CONNECTED and bool(self.access_token_encrypted)


class SyncCursor(models.Model):
    """Where the full sync of one resource of a store stands: the run, pages done, next page.

    The page's rows and the cursor's advance commit together, so a worker killed mid-page leaves
    the cursor at that page and the retried delivery fetches it again (upserts: no duplicates).
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    class Resource(models.TextChoices):
        PRODUCTS = "products"
        CUSTOMERS = "customers"
        ORDERS = "orders"

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="cursors")
    resource = models.TextField(choices=Resource.choices)
    run_id = models.UUIDField()
    pages_done = models.IntegerField(default=0)
    next_url = models.TextField(blank=True, default="")  # the `Link: rel="next"` URL
    total = models.IntegerField(null=True, blank=True)  # `x-total-count`
    rows_synced = models.IntegerField(default=0)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["store", "resource"], name="ns_cursor_store_uniq")
        ]


class WebhookReceipt(models.Model):
    """One accepted store webhook: its identity makes a replay write nothing.

    Only ids are kept (the LGPD webhooks' bodies carry e-mail, phone and CPF: never stored).
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="receipts")
    event = models.CharField(max_length=64)  # e.g. "order/paid"
    ns_resource_id = models.BigIntegerField(null=True, blank=True)
    identity = models.CharField(max_length=200)
    received_at = models.DateTimeField(auto_now_add=True)
    processed_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["store", "identity"], name="ns_receipt_identity_uniq")
        ]
        indexes = [models.Index(fields=["store", "-received_at"], name="ns_receipt_store_idx")]


class RateBucket(models.Model):
    """The token bucket every worker process of a store draws from (one row per store).

    Updated in one `UPDATE ... RETURNING` on database time, so processes on several machines
    share it; `blocked_until` is set from a 429's Retry-After for all of them.
    """

    ns_store_id = models.BigIntegerField(primary_key=True)
    tokens = models.FloatField()
    refilled_at = models.DateTimeField()
    blocked_until = models.DateTimeField(null=True, blank=True)


class IntegrationHealth(models.Model):
    """One ping of a store's API (`GET /store`) by `health-check-integrations`."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="health")
    integration = models.CharField(max_length=32, default="nuvemshop")
    ok = models.BooleanField()
    status_code = models.IntegerField(null=True, blank=True)
    latency_ms = models.IntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True, default="")
    consecutive_failures = models.IntegerField(default=0)
    checked_at = models.DateTimeField()

    class Meta:
        db_table = "integration_health"  # seed 000 §7.7's name
        verbose_name = "integration health check"
        verbose_name_plural = "integration health"
        indexes = [models.Index(fields=["store", "-checked_at"], name="ns_health_store_idx")]


class CustomerLink(models.Model):
    """A store's customer id -> the CRM contact it was matched to (e-mail, phone or created)."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="customer_links")
    ns_customer_id = models.BigIntegerField()
    contact = models.ForeignKey(
        "crm.Contact", on_delete=models.CASCADE, related_name="nuvemshop_links"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["store", "ns_customer_id"], name="ns_customer_link_uniq"
            )
        ]


class ShopRedaction(models.Model):
    """A redaction to carry out in the shop (`PUT /customers/{id}` with the identity blanked).

    Written in the LGPD redaction's transaction; `nuvemshop-sync-worker` makes the call.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="redactions")
    ns_customer_id = models.BigIntegerField()
    lgpd_request_id = models.UUIDField()
    status = models.TextField(choices=Status.choices, default=Status.PENDING)
    error = models.CharField(max_length=500, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["lgpd_request_id", "store", "ns_customer_id"], name="ns_redaction_uniq"
            )
        ]


class SkippedRecord(models.Model):
    """A store record that could not be stored (a shape or a value the API does not document,
    e.g. a total of "12,50"): the rest of its page was stored without it.

    One row per record, updated when it fails again and removed once it is stored (a later
    webhook, a resync, a reprocessed dead letter). Only ids and the error (redacted) are kept.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="skipped")
    resource = models.CharField(max_length=32)  # "orders", "products", "customers"
    ns_id = models.BigIntegerField()
    source = models.CharField(max_length=32)  # "sync" (a full sync's page) or the webhook's event
    error = models.CharField(max_length=500)
    failures = models.IntegerField(default=1)
    first_failed_at = models.DateTimeField(auto_now_add=True)
    last_failed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["store", "resource", "ns_id"], name="ns_skipped_record_uniq"
            )
        ]
