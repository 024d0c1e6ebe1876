"""Text to chunks, and the chunks' deterministic ids.

A chunk is a window of about `CHUNK_WORDS` words overlapping the previous one by
`OVERLAP_WORDS`, so an answer split by a boundary is still whole in one chunk. The id is the
SHA-256 of the content and the version (seed 000 §9.3), namespaced by the organization and the
source, so the same text in two tenants or two products never shares a row; `version` changes
with the chunker or the embedding model, so either change re-embeds everything.
"""

from __future__ import annotations

import hashlib

from ai.conf import ai_settings

CHUNKER_VERSION = "1"
CHUNK_WORDS = 120
OVERLAP_WORDS = 20


def chunk_version() -> str:
    """The version stored with each chunk: the chunker's and the embedding model's."""
    model = "mock" if ai_settings.MOCK else ai_settings.EMBEDDING_MODEL
    return f"{CHUNKER_VERSION}:{model}"[:32]


def split_text(text: str) -> list[str]:
    """Windows of CHUNK_WORDS words (the last may be shorter); empty text gives none."""
    words = text.split()
    if not words:
        return []
    step = CHUNK_WORDS - OVERLAP_WORDS
    starts = range(0, max(len(words) - OVERLAP_WORDS, 1), step)
    return [" ".join(words[start : start + CHUNK_WORDS]) for start in starts]


def chunk_id(
    *, organization_id: object, source_kind: str, source_id: str, content: str, version: str
) -> str:
    key = "\x1f".join((str(organization_id), source_kind, source_id, content, version))
    return hashlib.sha256(key.encode()).hexdigest()
