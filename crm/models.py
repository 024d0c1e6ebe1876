"""The CRM records the bus talks about: contacts, conversations, messages, consents, leads, orders.

Created by the `deskcomm` app's migrations, whose tables they keep (`db_table`); `crm` owns them
since the layering split (crm/migrations/0001 is state-only). `PERSONAL_DATA` names the fields
that may hold a data subject's personal data; every one must be covered by an LGPD data category
(`lgpd/categories.py`), which a test checks.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models

from core.models import Organization


class Contact(models.Model):
    """A person the organization talks to (minimal: what the workers and LGPD need).

    The CPF is stored encrypted with its own key context (`core.crypto`, "cpf"); `cpf` reads
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

    class Meta:
        db_table = "deskcomm_contact"  # kept from the deskcomm app

    def __str__(self) -> str:
        return self.name or str(self.id)

    @property
    def cpf(self) -> str:
        from core import crypto

        return crypto.decrypt(self.CPF_CONTEXT, self.cpf_encrypted) if self.cpf_encrypted else ""

    @cpf.setter
    def cpf(self, value: str) -> None:
        from core import crypto

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

    class Meta:
        db_table = "deskcomm_conversation"  # kept from the deskcomm app

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

    class Meta:
        db_table = "deskcomm_message"  # kept from the deskcomm app

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
        db_table = "deskcomm_consentrecord"  # kept from the deskcomm app
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

    class Meta:
        db_table = "deskcomm_lead"  # kept from the deskcomm app

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
        db_table = "deskcomm_leadactivity"  # kept from the deskcomm app
        verbose_name_plural = "lead activities"

    def __str__(self) -> str:
        return f"{self.kind} {self.id}"


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
        db_table = "deskcomm_order"  # kept from the deskcomm app
        constraints = [
            models.UniqueConstraint(fields=["organization", "number"], name="order_number_uniq")
        ]

    def __str__(self) -> str:
        return self.number
