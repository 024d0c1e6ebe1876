"""Event types the AI app emits that seed 000 §3 does not list (imported at start-up).

`message.received` v2 (ids only, no body) is declared by the WhatsApp app; the AI consumers read
both versions (`ai.inbound`), so nothing is declared for it here.
"""

from __future__ import annotations

from eventbus import catalog

catalog.declare(
    "knowledge.article_changed",
    required=["article_id", "action"],
    description="ai: a knowledge-base article was saved or deleted (rag-indexer-worker)",
)
