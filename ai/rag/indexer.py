"""The RAG indexer: a source's text -> chunks -> embeddings -> the `ai_chunk` table.

`source_index` is idempotent: chunks whose deterministic id already exists are neither embedded
nor written again (unchanged content writes nothing), chunks of the old text are deleted, and a
source without text (deleted, unpublished) loses all its chunks.
"""

from __future__ import annotations

import uuid
from contextlib import closing
from dataclasses import dataclass

from django.db import transaction

from ai.budget import budget_charge
from ai.gateway import EmbeddingResult, Gateway, gateway_for
from ai.models import Chunk
from ai.rag.chunking import chunk_id, chunk_version, split_text
from ai.rag.sources import source_text


@dataclass(frozen=True)
class IndexResult:
    written: int
    deleted: int


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
    embedded = _embed(organization_id, [wanted[pk][1] for pk in new_ids], gateway)
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
            budget_charge(
                organization_id,
                cost_cents=embedded.cost_cents,
                tokens_in=embedded.tokens,
                tokens_out=0,
            )
    return IndexResult(len(new_ids), deleted)


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
