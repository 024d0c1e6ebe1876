"""The AI app's records: per-organization settings and budget, daily usage snapshots, the
knowledge base, and the RAG chunks (pgvector).

`PERSONAL_DATA` names fields that may hold a data subject's personal data; LGPD categories cover
them (`ai/personal_data.py`): a chunk made from a contact's data is deleted with the contact's
redaction.
"""

from __future__ import annotations

import uuid
from typing import ClassVar

from django.db import models
from pgvector.django import HnswIndex, VectorField

from ai.conf import EMBEDDING_DIMENSIONS
from core.models import Organization


class AiAccount(models.Model):
    """An organization's AI settings and today's spend (one row per organization, made lazily).

    `api_key_encrypted`: the organization's own provider key (core.crypto context
    `ai_provider`); empty: the deployment's AI_API_KEY. `spent_cents` counts since `spent_day`
    (a day in AI_BUDGET_TIME_ZONE); `daily-budget-reset` snapshots it into `ai_usage_daily`.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    organization = models.OneToOneField(
        Organization, on_delete=models.CASCADE, primary_key=True, related_name="ai_account"
    )
    api_key_encrypted = models.TextField(blank=True, default="")
    daily_budget_cents = models.PositiveIntegerField()
    media_retention_days = models.PositiveIntegerField(null=True, blank=True)
    spent_day = models.DateField()
    spent_cents = models.DecimalField(max_digits=14, decimal_places=4, default=0)
    calls = models.PositiveIntegerField(default=0)
    tokens_in = models.BigIntegerField(default=0)
    tokens_out = models.BigIntegerField(default=0)
    warned_at = models.DateTimeField(null=True, blank=True)
    throttled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ai_account"
        verbose_name = "AI account"

    def __str__(self) -> str:
        return f"AI account of {self.organization_id}"

    @property
    def api_key(self) -> str:
        from core import crypto

        if not self.api_key_encrypted:
            return ""
        return crypto.decrypt("ai_provider", self.api_key_encrypted)

    @api_key.setter
    def api_key(self, value: str) -> None:
        from core import crypto

        self.api_key_encrypted = crypto.encrypt("ai_provider", value) if value else ""


class AiUsageDaily(models.Model):
    """One organization's AI usage on one (budget time zone) day, written by daily-budget-reset."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    spent_cents = models.DecimalField(max_digits=14, decimal_places=4)
    budget_cents = models.PositiveIntegerField()
    calls = models.PositiveIntegerField()
    tokens_in = models.BigIntegerField()
    tokens_out = models.BigIntegerField()
    throttled = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "ai_usage_daily"
        verbose_name = "AI usage day"
        verbose_name_plural = "AI usage (daily)"
        constraints = [
            models.UniqueConstraint(fields=["organization", "day"], name="ai_usage_daily_uniq")
        ]

    def __str__(self) -> str:
        return f"{self.organization_id} {self.day}"


class KnowledgeArticle(models.Model):
    """A knowledge-base article of an organization (FAQ, policy...), indexed for the responder."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(
        Organization, on_delete=models.CASCADE, related_name="knowledge_articles"
    )
    title = models.CharField(max_length=300)
    body = models.TextField()
    published = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "ai_knowledge_article"

    def __str__(self) -> str:
        return self.title


class Chunk(models.Model):
    """A piece of a source's text and its embedding. The id is `sha256(content + version)`
    (seed 000 §9.3), so re-indexing unchanged text writes nothing.

    `contact_id` is set for chunks made from a contact's data (contact, lead): the LGPD redaction
    deletes them.
    """

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ("content",)

    class Source(models.TextChoices):
        PRODUCT = "product"
        ARTICLE = "article"
        CONTACT = "contact"
        LEAD = "lead"

    id = models.CharField(primary_key=True, max_length=64)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    source_kind = models.CharField(max_length=16, choices=Source.choices)
    source_id = models.CharField(max_length=64)
    contact_id = models.UUIDField(null=True, blank=True)
    ordinal = models.PositiveIntegerField()
    content = models.TextField()
    version = models.CharField(max_length=32)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "ai_chunk"
        indexes = [
            # The indexer's "this source's chunks" (replace, delete).
            models.Index(fields=["organization", "source_kind", "source_id"], name="chunk_src_idx"),
            models.Index(fields=["contact_id"], name="chunk_contact_idx"),
            # Retrieval: top-k by cosine distance (organization filtered in the same query).
            HnswIndex(
                name="chunk_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_kind}:{self.source_id}#{self.ordinal}"


class IndexPending(models.Model):
    """A source whose (re-)indexing was deferred because the organization's AI budget had no room
    for its embeddings: `daily-budget-reset` indexes it once the new day's budget allows."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()  # ids only

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    source_kind = models.CharField(max_length=16, choices=Chunk.Source.choices)
    source_id = models.CharField(max_length=64)
    deferred_at = models.DateTimeField()

    class Meta:
        db_table = "ai_index_pending"
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "source_kind", "source_id"], name="ai_index_pending_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.source_kind}:{self.source_id}"


class ProviderHealth(models.Model):
    """One ping of the installation's model provider by `health-check-integrations` (a tiny
    embedding through the gateway): read by the health endpoint's `ai_provider` check and the
    `deskcomm_ai_provider_up` gauge, without calling the provider inside either."""

    PERSONAL_DATA: ClassVar[tuple[str, ...]] = ()

    checked_at = models.DateTimeField()
    ok = models.BooleanField()
    latency_ms = models.PositiveIntegerField()
    error = models.TextField(blank=True, default="")  # the error class and status only
    consecutive_failures = models.PositiveIntegerField(default=0)

    class Meta:
        db_table = "ai_provider_health"
        verbose_name_plural = "provider health"
        indexes = [models.Index(fields=["-checked_at"], name="ai_provider_health_recent")]

    def __str__(self) -> str:
        return f"{self.checked_at:%Y-%m-%d %H:%M} {'ok' if self.ok else 'failing'}"
