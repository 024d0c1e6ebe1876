"""A WAHA session of an organization: where its WhatsApp number is served and how to reach it.

The API key and the webhook HMAC secret are stored encrypted (core.crypto context `waha_byo`,
rotated by `manage.py rotate_keys` like every registered context); `api_key` and
`webhook_secret` read and write them in clear. Empty fields fall back to the environment's
WAHA_BASE_URL / WAHA_API_KEY / WAHA_WEBHOOK_SECRET (one self-hosted WAHA for the installation).
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from core.models import Organization
from whatsapp.conf import API_KEY_CONTEXT, whatsapp_settings


class WahaSession(models.Model):
    """One WAHA session (one WhatsApp number). Its name is WAHA's session name, unique here too:
    the inbound webhook URL `/api/webhooks/waha/<name>` finds the organization by it."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()  # the organization's own number, not a subject's

    class Status(models.TextChoices):  # WAHA's WAHASessionStatus, plus "UNKNOWN" (never synced)
        UNKNOWN = "UNKNOWN"
        STOPPED = "STOPPED"
        STARTING = "STARTING"
        SCAN_QR_CODE = "SCAN_QR_CODE"
        WORKING = "WORKING"
        FAILED = "FAILED"
        MISSING = "MISSING"  # WAHA does not list the session at all

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="waha_sessions"
    )
    name = models.CharField(max_length=64, unique=True, help_text="WAHA's session name")
    base_url = models.CharField(
        max_length=300, blank=True, default="", help_text="empty: WAHA_BASE_URL"
    )
    api_key_encrypted = models.TextField(blank=True, default="")
    webhook_secret_encrypted = models.TextField(blank=True, default="")
    # The session sends this organization's messages (one per organization is the default one).
    is_default = models.BooleanField(default=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.UNKNOWN)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync_error = models.TextField(blank=True, default="")
    # WAHA answered 429 with Retry-After: no send through this session before then.
    paused_until = models.DateTimeField(null=True, blank=True)
    # When an alert was raised for the current bad status (once per episode).
    alerted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "WAHA session"
        constraints = [
            models.UniqueConstraint(
                fields=["organization"],
                condition=models.Q(is_default=True),
                name="waha_one_default_session",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def effective_base_url(self) -> str:
        return (self.base_url or whatsapp_settings.BASE_URL).rstrip("/")

    @property
    def api_key(self) -> str:
        return self._read(self.api_key_encrypted) or whatsapp_settings.API_KEY

    @api_key.setter
    def api_key(self, value: str) -> None:
        self.api_key_encrypted = self._write(value)

    @property
    def webhook_secret(self) -> str:
        return self._read(self.webhook_secret_encrypted) or whatsapp_settings.WEBHOOK_SECRET

    @webhook_secret.setter
    def webhook_secret(self, value: str) -> None:
        self.webhook_secret_encrypted = self._write(value)

    @staticmethod
    def _read(token: str) -> str:
        from core import crypto

        return crypto.decrypt(API_KEY_CONTEXT, token) if token else ""

    @staticmethod
    def _write(value: str) -> str:
        from core import crypto

        return crypto.encrypt(API_KEY_CONTEXT, value) if value else ""


class WebhookReceipt(models.Model):
    """A WAHA webhook's event id, once accepted: a replay of the same id is a duplicate. Kept for
    twice the timestamp window (older replays are refused by their timestamp)."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    session = models.ForeignKey(WahaSession, on_delete=models.CASCADE, related_name="+")
    event_id = models.CharField(max_length=200)
    received_at = models.DateTimeField()

    class Meta:
        db_table = "whatsapp_webhook_receipt"
        constraints = [
            models.UniqueConstraint(fields=["session", "event_id"], name="waha_receipt_once")
        ]
        indexes = [models.Index(fields=["session", "received_at"], name="waha_receipt_age")]

    def __str__(self) -> str:
        return self.event_id


class PendingAck(models.Model):
    """A delivery/read receipt that arrived before its message's WAHA id was stored (WAHA can
    post `message.ack` before the send's answer reaches the worker): kept by the message's key
    (WhatsApp's `key.id`) and applied when the send stores the id (whatsapp.sending). Receipts
    for no message of ours are dropped after PENDING_ACK_DAYS (sync-sessions)."""

    # Only WhatsApp's key is kept, not WAHA's whole id (which embeds the chat id, a number).
    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    message_key = models.CharField(max_length=100)
    ack = models.SmallIntegerField()
    received_at = models.DateTimeField()

    class Meta:
        db_table = "whatsapp_pending_ack"
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "message_key"], name="waha_pending_ack_once"
            )
        ]
        indexes = [models.Index(fields=["received_at"], name="waha_pending_ack_age")]

    def __str__(self) -> str:
        return self.message_key
