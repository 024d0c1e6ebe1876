"""The AI app's event types: what the assistant did, and the knowledge base it reads.

None is open to the API or to pipelines: each reports the assistant's own work (an answer, a
handoff, a sentiment alert, the spend against the budget), and `knowledge.article_changed` makes
the indexer re-read an article. `message.received` is the WhatsApp app's; the AI consumers read
both its versions (`ai.inbound`).
"""

from __future__ import annotations

from eventbus.store import catalog

SEED = "seed 000 §3"

catalog.declare_all(
    {
        "ai.responded": (
            "conversation_id",
            "message_id",
            "model",
            "tokens_in",
            "tokens_out",
            "cost_cents",
            "latency_ms",
        ),
        "ai.handoff_triggered": ("conversation_id", "reason", "from"),
        "ai.sentiment_alert": ("conversation_id", "sentiment", "score"),
        "ai.budget_warning": ("pct_used", "daily_budget_cents", "current_cents"),
        "ai.budget_throttled": ("daily_budget_cents", "current_cents", "throttle_until"),
    },
    description=SEED,
    # A customer waits for the human the assistant handed over to.
    priorities={"ai.handoff_triggered": catalog.HIGH_PRIORITY},
)
catalog.declare(
    "knowledge.article_changed",
    required=["article_id", "action"],
    description="ai: a knowledge-base article was saved or deleted (rag-indexer-worker)",
)
