"""The RAG indexer: a source's text -> chunks -> embeddings -> the `ai_chunk` table.

`source_index` is idempotent: chunks whose deterministic id already exists are neither embedded
nor written again (unchanged content writes nothing), chunks of the old text are deleted, and a
source without text (deleted, unpublished) loses all its chunks.

The embeddings are paid from the organization's AI budget: reserved before the call
(`budget_reserve`, check and charge in one statement) and settled after it. A source whose
embeddings do not fit today's budget is not embedded: it is recorded in `ai_index_pending` and
`pending_index` (run by `daily-budget-reset` after the reset) indexes it when the budget allows.
"""

from __future__ import annotations

import uuid
from contextlib import closing
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from ai.budget import budget_release, budget_reserve, charge_embedding, embedding_estimate
from ai.gateway import EmbeddingResult, Gateway, gateway_for
from ai.models import Chunk, IndexPending
from ai.rag.chunking import chunk_id, chunk_version, split_text
from ai.rag.sources import source_text


@dataclass(frozen=True)
class IndexResult:
    written: int
    deleted: int
    deferred: bool = False


def source_index(
    *, organization_id: uuid.UUID, kind: str, source_id: str, gateway: Gateway | None = None
) -> IndexResult:
    """Bring one source's chunks in line with its current text."""
    found = source_text(organization_id, kind, source_id)
    mine = Chunk.objects.filter(
        organization_id=organization_id, source_kind=kind, source_id=source_id
    )
    if found is None:
        deleted, _ = mine.delete()
        return IndexResult(0, deleted)
    version = chunk_version()
    wanted = {
        chunk_id(
            organization_id=organization_id,
            source_kind=kind,
            source_id=source_id,
            content=text,
            version=version,
        ): (ordinal, text)
        for ordinal, text in enumerate(split_text(found.text))
    }
    existing = set(mine.values_list("pk", flat=True))
    new_ids = [pk for pk in wanted if pk not in existing]
    stale = existing - set(wanted)
    texts = [wanted[pk][1] for pk in new_ids]
    _, reserved = embedding_estimate(texts) if texts else (0, 0.0)
    if texts and not budget_reserve(organization_id, reserved):
        _defer(organization_id, kind, source_id)
        return IndexResult(0, 0, deferred=True)
    try:
        embedded = _embed(organization_id, texts, gateway)
    except BaseException:
        if texts:
            budget_release(organization_id, reserved)
        raise
    pending = IndexPending.objects.filter(
        organization_id=organization_id, source_kind=kind, source_id=source_id
    )
    if pending.exists():  # a read: re-indexing unchanged content still writes nothing
        pending.delete()
    with transaction.atomic():  # one commit per source: the writes and the charge together
        deleted, _ = mine.filter(pk__in=stale).delete() if stale else (0, {})
        Chunk.objects.bulk_create(
            [
                Chunk(
                    id=pk,
                    organization_id=organization_id,
                    source_kind=kind,
                    source_id=source_id,
                    contact_id=found.contact_id,
                    ordinal=wanted[pk][0],
                    content=wanted[pk][1],
                    version=version,
                    embedding=vector,
                )
                for pk, vector in zip(new_ids, embedded.vectors if embedded else [], strict=True)
            ],
            ignore_conflicts=True,  # a concurrent run wrote the same deterministic ids
        )
        if embedded is not None:
            charge_embedding(organization_id, embedded, reserved_cents=reserved)
    return IndexResult(len(new_ids), deleted)


def _defer(organization_id: uuid.UUID, kind: str, source_id: str) -> None:
    IndexPending.objects.get_or_create(
        organization_id=organization_id,
        source_kind=kind,
        source_id=source_id,
        defaults={"deferred_at": timezone.now()},
    )


def pending_index(gateway: Gateway | None = None) -> int:
    """Index the deferred sources, oldest first, while each organization's budget allows (a
    source refused again stays pending); returns the sources indexed."""
    done = 0
    refused: set[uuid.UUID] = set()
    for row in IndexPending.objects.order_by("deferred_at", "pk"):
        if row.organization_id in refused:
            continue
        result = source_index(
            organization_id=row.organization_id,
            kind=row.source_kind,
            source_id=row.source_id,
            gateway=gateway,
        )
        if result.deferred:
            refused.add(row.organization_id)
        else:
            done += 1
    return done


def _embed(
    organization_id: uuid.UUID, texts: list[str], gateway: Gateway | None
) -> EmbeddingResult | None:
    """The embeddings of the new chunks (outside any transaction: a provider call can be slow)."""
    if not texts:
        return None
    if gateway is None:
        with closing(gateway_for(organization_id)) as own:
            return own.embed(texts)
    return gateway.embed(texts)


def contact_chunks_delete(*, organization_id: uuid.UUID, contact_id: uuid.UUID) -> int:
    """Delete every chunk made from a contact's data (merge, redaction)."""
    deleted, _ = Chunk.objects.filter(
        organization_id=organization_id, contact_id=contact_id
    ).delete()
    return deleted
