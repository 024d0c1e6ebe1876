"""Event types the CRM emits that seed 000 §3 does not list (each app's `events` module is
imported at start-up). Seed 000 §6.1 uses `message.queued` between the CRM and the send worker."""

from __future__ import annotations

from eventbus import catalog

catalog.declare(
    "message.queued",
    required=["message_id", "conversation_id", "contact_id", "channel"],
    description="crm: send_message queued an outbound message; the channel's worker sends it",
    priority=catalog.HIGH_PRIORITY,  # a customer waits for it
)
