"""Retrieval: the `k` chunks nearest a query by cosine distance, within one organization.

The HNSW index (`chunk_embedding_hnsw`, vector_cosine_ops) serves the ORDER BY; the organization
filter runs on the index scan with pgvector's iterative scan (`hnsw.iterative_scan`), so a small
tenant among large ones still gets its k rows. Chunks made from a contact's data are visible only
when answering that contact.
"""

from __future__ import annotations

import uuid
from contextlib import closing
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Q
from pgvector.django import CosineDistance

from ai.budget import budget_release, budget_reserve, charge_embedding, embedding_estimate
from ai.conf import ai_settings
from ai.gateway import Gateway, gateway_for
from ai.models import Chunk
from core import flag_state


@dataclass(frozen=True)
class Retrieved:
    id: str
    source_kind: str
    source_id: str
    content: str
    distance: float


def retrieve(
    *,
    organization_id: uuid.UUID,
    query: str,
    k: int = 4,
    contact_id: uuid.UUID | None = None,
    gateway: Gateway | None = None,
) -> list[Retrieved]:
    """Top-k chunks for `query` (embedded through the gateway); none for an empty query or
    when the organization's `rag` flag is off (core.flags)."""
    if not query.strip() or k <= 0:
        return []
    if not flag_state.enabled(organization_id, "rag"):
        return []
    if not Chunk.objects.filter(organization_id=organization_id).exists():
        return []  # nothing indexed yet: no embedding call to pay for
    _, reserved = embedding_estimate([query])
    if not budget_reserve(organization_id, reserved):
        return []  # over the AI budget: no query embedding, no retrieved context
    try:
        if gateway is None:
            with closing(gateway_for(organization_id)) as own:
                embedded = own.embed([query])
        else:
            embedded = gateway.embed([query])
    except BaseException:
        budget_release(organization_id, reserved)
        raise
    charge_embedding(organization_id, embedded, reserved_cents=reserved)
    vector = embedded.vectors[0]
    return nearest(organization_id=organization_id, vector=vector, k=k, contact_id=contact_id)


def nearest(
    *,
    organization_id: uuid.UUID,
    vector: list[float],
    k: int,
    contact_id: uuid.UUID | None = None,
    exact: bool = False,
    ef_search: int | None = None,
) -> list[Retrieved]:
    """Top-k by cosine distance; `exact=True` forces a sequential scan (the bench's baseline);
    `ef_search` overrides AI_RAG_EF_SEARCH."""
    visible = (
        Q(contact_id__isnull=True) | Q(contact_id=contact_id)
        if contact_id
        else Q(contact_id__isnull=True)
    )
    rows = (
        Chunk.objects.filter(visible, organization_id=organization_id)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance")
        .values_list("id", "source_kind", "source_id", "content", "distance")[:k]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        if exact:
            cursor.execute("SET LOCAL enable_indexscan = off")
        else:
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            candidates = max(int(ef_search or ai_settings.RAG_EF_SEARCH), k)
            cursor.execute(f"SET LOCAL hnsw.ef_search = {candidates}")  # an int: no injection
        found = [Retrieved(*row) for row in rows]
    # relaxed_order may return neighbours slightly out of order: put them back in order.
    return sorted(found, key=lambda r: r.distance)
