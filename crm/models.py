"""The CRM records the bus talks about: contacts, conversations, messages, consents, leads, orders.

Created by the `deskcomm` app's migrations, whose tables they keep (`db_table`); `crm` owns them
since the layering split (crm/migrations/0001 is state-only). `PERSONAL_DATA` names the fields
that may hold a data subject's personal data; every one must be covered by an LGPD data category
(`crm/personal_data.py`), which a test checks.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.conf import settings
from django.db import models

from core.models import Organization


def cpf_digits(value: str) -> str:
    """A CPF as its 11 digits ("123.456.789-09" -> "12345678909"); "" when it has not 11."""
    digits = "".join(c for c in value if c.isdigit())
    return digits if len(digits) == 11 else ""


def phone_digits(value: str) -> list[str]:
    """A phone's digits, and the same number with or without Brazil's country code (55), as
    the CRM compares them ("+55 (11) 98765-4321" matches "11987654321")."""
    digits = "".join(c for c in value if c.isdigit())
    if not digits:
        return []
    if digits.startswith("55") and len(digits) in (12, 13):
        return [digits, digits[2:]]
    if len(digits) in (10, 11):
        return [digits, f"55{digits}"]
    return [digits]


class Contact(models.Model):
    """A person the organization talks to (minimal: what the workers and LGPD need).

    The CPF is stored encrypted with its own key context (`core.crypto`, "cpf"); `cpf` reads
    and writes it in clear. `anonymized_at` is set once by the LGPD redaction.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = (
        "name",
        "phone",
        "email",
        "cpf_encrypted",
        "cpf_digest",
    )
    CPF_CONTEXT = "cpf"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="contacts"
    )
    name = models.CharField(max_length=200, blank=True)
    phone = models.CharField(max_length=32, blank=True)
    email = models.EmailField(blank=True)
    cpf_encrypted = models.TextField(blank=True, default="")
    # The CPF's blind index (core.crypto.blind_index of its digits), set with it: matching a
    # contact by CPF (crm.selectors.match_contact) without decrypting every row.
    cpf_digest = models.CharField(max_length=64, blank=True, default="")
    anonymized_at = models.DateTimeField(null=True, blank=True)
    # Set when the contact must receive no more messages (a STOP/SAIR reply, an operator's block);
    # `send_message` still queues, the send worker refuses (`system.send_blocked`).
    blocked_at = models.DateTimeField(null=True, blank=True)
    blocked_reason = models.CharField(max_length=64, blank=True, default="")
    # Set by crm.services.contact_merge on the contact merged away: its records, identities and
    # missing fields went to `merged_into`; its own personal fields were emptied.
    merged_into = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="merged_from"
    )
    merged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "deskcomm_contact"  # kept from the deskcomm app
        indexes = [
            models.Index(
                fields=["organization", "cpf_digest"],
                condition=~models.Q(cpf_digest=""),
                name="contact_cpf_digest_idx",
            ),
            # crm.selectors.match_contact: the phone's digits, whatever its punctuation.
            models.Index(
                "organization",
                models.Func(
                    models.F("phone"),
                    models.Value(r"\D"),
                    models.Value(""),
                    models.Value("g"),
                    function="regexp_replace",
                ),
                condition=~models.Q(phone=""),
                name="contact_phone_digits_idx",
            ),
        ]

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
        self.cpf_digest = crypto.blind_index(self.CPF_CONTEXT, cpf_digits(value))


class ConversationStatus(models.TextChoices):
    OPEN = "open"
    RESOLVED = "resolved"


class ContactIdentity(models.Model):
    """One normalized identifier of a contact (crm.identity): a phone, an e-mail, a channel id.

    `(organization, kind, value)` is unique: one person per identifier per organization, which
    the database guarantees (crm.services.contact_resolve claims keys with INSERT ... ON
    CONFLICT), so concurrent first messages from one number cannot create two contacts.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("value",)

    class Kind(models.TextChoices):
        PHONE = "phone"
        EMAIL = "email"
        CPF = "cpf"  # the CPF's blind index, never the CPF
        WHATSAPP_LID = "whatsapp_lid"
        NUVEMSHOP = "nuvemshop"  # "<store id>:<customer id>"

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="identities")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    value = models.CharField(max_length=254)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "contact identities"
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "kind", "value"], name="contact_identity_uniq"
            )
        ]
        indexes = [models.Index(fields=["contact"], name="contact_identity_contact_idx")]

    def __str__(self) -> str:
        return f"{self.kind} of {self.contact_id}"


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
    # The AI responder answers while this is on; a handoff to a human turns it off.
    bot_active = models.BooleanField(default=True)
    # WhatsApp's customer-service window: free-form messages only within 24 h of this.
    last_inbound_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The lifecycle (crm.conversations): open until an agent resolves it; reopened by an agent
    # or the API. Each change emits conversation.assigned/resolved/reopened with the row.
    status = models.CharField(
        max_length=16, choices=ConversationStatus.choices, default=ConversationStatus.OPEN
    )
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    assigned_at = models.DateTimeField(null=True, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=200, blank=True, default="")  # an audit actor

    class Meta:
        db_table = "deskcomm_conversation"  # kept from the deskcomm app
        indexes = [
            models.Index(fields=["organization", "status", "assigned_to"], name="conv_status_idx")
        ]

    def __str__(self) -> str:
        return f"{self.channel} {self.id}"


class Message(models.Model):
    """One message of a conversation. Redaction keeps it but scrubs personal data from it."""

    # sentiment/sentiment_score: AI-derived data about the subject (lgpd AiDerivedCategory).
    # external_id: WhatsApp's message ids embed the chat id ("true_5511...@c.us_3EB0...").
    PERSONAL_DATA: ClassVar[tuple[str, ...]] = (
        "body",
        "media_urls",
        "error_message",
        "sentiment",
        "sentiment_score",
        "external_id",
    )

    class Direction(models.TextChoices):
        INBOUND = "inbound"
        OUTBOUND = "outbound"

    class Status(models.TextChoices):
        RECEIVED = "received"  # inbound
        QUEUED = "queued"  # outbound, written by send_message; the send worker picks it up
        SENDING = "sending"  # the send worker is talking to the channel
        SENT = "sent"
        DELIVERED = "delivered"
        READ = "read"
        FAILED = "failed"
        BLOCKED = "blocked"  # refused before sending (STOP, no consent, 24 h window)

    class Sender(models.TextChoices):
        CONTACT = "contact"  # inbound
        AGENT = "agent"  # a person of the organization
        AI = "ai"  # the AI responder
        SYSTEM = "system"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    direction = models.TextField(choices=Direction.choices)
    status = models.TextField(choices=Status.choices, default=Status.RECEIVED)
    sender = models.TextField(choices=Sender.choices, default=Sender.CONTACT)
    body = models.TextField(blank=True, default="")
    media_urls = models.JSONField(default=list, blank=True)
    # A template message may be sent outside the 24 h window.
    is_template = models.BooleanField(default=False)
    # The inbound message this one answers (the AI responder's idempotency: one AI reply each).
    reply_to = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replies"
    )
    # The channel's id of the message (WAHA's `id`, e.g. "true_5511...@c.us_3EB0..."), once known.
    external_id = models.CharField(max_length=200, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True, default="")
    error_message = models.TextField(blank=True, default="")
    # AI-derived: set once by the sentiment worker (null = not classified yet).
    sentiment = models.CharField(max_length=32, null=True, blank=True)
    sentiment_score = models.FloatField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "deskcomm_message"  # kept from the deskcomm app
        indexes = [
            models.Index(fields=["conversation", "created_at"], name="message_conv_time_idx"),
            models.Index(
                fields=["status", "updated_at"],
                name="message_sending_idx",
                condition=models.Q(status="sending"),
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "external_id"],
                condition=~models.Q(external_id=""),
                name="message_external_id_uniq",
            ),
            models.UniqueConstraint(
                fields=["reply_to"],
                condition=models.Q(sender="ai"),
                name="message_one_ai_reply_uniq",
            ),
        ]

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
    """A sales opportunity moving through pipeline stages, open until won or lost.

    Its events come from the database, in the same transaction as the row change, through the
    `emit_event` SQL function (crm/migrations/0009, core/migrations/0002): triggers emit
    `lead.stage_changed` (stage_id), `lead.assigned` (owner), `lead.updated` (the other fields)
    and `lead.deleted` (deleted_at set: a soft delete); the SQL functions `mark_lead_won` and
    `mark_lead_lost` close a lead and emit `lead.won`/`lead.lost`. `lead.created` is emitted by
    `crm.services.lead_create`. Write leads through `crm.services`.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("name", "close_reason")  # often the person's name

    class Status(models.TextChoices):
        OPEN = "open"
        WON = "won"
        LOST = "lost"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="leads")
    contact = models.ForeignKey(
        Contact, on_delete=models.SET_NULL, null=True, blank=True, related_name="leads"
    )
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=50, default="manual")
    pipeline_id = models.CharField(max_length=64, default="default")
    stage_id = models.CharField(max_length=64, default="new")
    # The organization's person who works the lead (a staff user bound to the organization).
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    status = models.TextField(choices=Status.choices, default=Status.OPEN)
    value_cents = models.BigIntegerField(null=True, blank=True)
    won_at = models.DateTimeField(null=True, blank=True)
    lost_at = models.DateTimeField(null=True, blank=True)
    close_reason = models.CharField(max_length=500, blank=True, default="")
    # A soft delete: the row stays (its history, its events), hidden from lists and writes.
    deleted_at = models.DateTimeField(null=True, blank=True)
    deleted_by = models.CharField(max_length=100, blank=True, default="")  # an actor string
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "deskcomm_lead"  # kept from the deskcomm app
        indexes = [
            models.Index(
                fields=["organization", "-created_at", "-id"],
                condition=models.Q(deleted_at__isnull=True),
                name="lead_org_live_idx",
            )
        ]

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
        indexes = [models.Index(fields=["lead", "-created_at"], name="leadactivity_lead_idx")]

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
        CANCELLED = "cancelled"  # a shop order the shop cancelled (nuvemshop.upserts)

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
    # When the customer placed it (a shop order's `created_at`; API orders: when confirmed).
    placed_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    # Set once by order-post-worker (the `order.post` phase); never undoes the confirmation.
    post_processed_at = models.DateTimeField(null=True, blank=True)
    # A pipeline's `set-status` node writes these (seed 004: tag, name, phase).
    status_tag = models.CharField(max_length=64, blank=True, default="")
    status_name = models.CharField(max_length=200, blank=True, default="")
    phase = models.CharField(max_length=64, blank=True, default="")
    # Orders synced from a Nuvemshop store: the store's ids and the shop-side states.
    ns_store_id = models.BigIntegerField(null=True, blank=True)
    ns_order_id = models.BigIntegerField(null=True, blank=True)
    payment_status = models.CharField(max_length=32, blank=True, default="")
    shipping_status = models.CharField(max_length=32, blank=True, default="")
    paid_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    fulfilled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "deskcomm_order"  # kept from the deskcomm app
        constraints = [
            models.UniqueConstraint(fields=["organization", "number"], name="order_number_uniq"),
            # Seed 000 §9.3: a replayed store event upserts, never duplicates.
            models.UniqueConstraint(
                fields=["organization", "ns_order_id"],
                condition=models.Q(ns_order_id__isnull=False),
                name="order_ns_order_id_uniq",
            ),
        ]

    def __str__(self) -> str:
        return self.number


class Product(models.Model):
    """A product the organization sells (synced from its Nuvemshop store, or entered by hand).

    No personal data. The RAG indexer turns name and description into searchable chunks.
    `deleted_at` marks a product removed from the store (its chunks are removed too).
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="products"
    )
    ns_store_id = models.BigIntegerField(null=True, blank=True)
    ns_product_id = models.BigIntegerField(null=True, blank=True)
    name = models.CharField(max_length=300)
    description = models.TextField(blank=True, default="")
    sku = models.CharField(max_length=100, blank=True, default="")
    price_cents = models.BigIntegerField(null=True, blank=True)
    currency = models.CharField(max_length=3, default="BRL")
    stock = models.IntegerField(null=True, blank=True)  # null: not tracked
    url = models.URLField(max_length=500, blank=True, default="")
    published = models.BooleanField(default=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "ns_product_id"],
                condition=models.Q(ns_product_id__isnull=False),
                name="product_ns_product_id_uniq",
            )
        ]

    def __str__(self) -> str:
        return self.name


# Handoff, SLA, CSAT, suggestions, notifications and analytics (crm.conversations, crm.handlers).
from crm.conversation_models import (  # noqa: E402, F401
    AgentNotification,
    AnalyticsCounted,
    AnalyticsDaily,
    ConversationSla,
    CsatRequest,
    HandoffRouting,
    TemplateSuggestion,
)


class Handoff(Conversation):
    """A conversation handed to a person (its bot is off): the admin's handoffs screen."""

    class Meta:
        proxy = True
        verbose_name = "handoff"
