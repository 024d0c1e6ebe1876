"""The event type the conversation consumers add to seed 000 §3 (imported by crm.events).

Seed 000 lists `sla-tracker` as a consumer of `conversation.opened` but names no event for a
missed deadline: `conversation.sla_breached` is ours, emitted once per conversation and kind
(`first_response` or `resolution`) by the `sla-breaches` job. Ids and times only.
"""

from __future__ import annotations

from eventbus.store import catalog

catalog.declare(
    "conversation.sla_breached",
    required=("conversation_id", "kind", "due_at", "breached_at"),
    description="crm: a conversation missed its first-response or resolution deadline",
)
