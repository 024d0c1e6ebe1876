"""The WhatsApp channel's event types: messages in and out, and the channel's own states.

None is open to the API or to pipelines: each states something WAHA told the platform (a message
arrived, was delivered, read or failed; a session changed), and the assistant, the CRM and the
subscribers act on them as facts.

Seed 000's v1 of `message.received` and `message.sent` carried the message text (`body`) to
every consumer and webhook: personal data in the event log. v2 holds ids only; consumers read
the text from the Message row (crm.Message), which the LGPD redaction scrubs.
"""

from __future__ import annotations

import datetime as dt

from eventbus.store import catalog

SEED = "seed 000 §3"
V1_CARRIED_TEXT = "seed 000 §3 (superseded: it carried the message text)"
IDS = ("message_id", "conversation_id", "contact_id", "direction", "channel", "waha_message_id")

catalog.declare(
    "message.received",
    required=("direction", "conversation_id", "contact_id", "body", "waha_message_id"),
    description=V1_CARRIED_TEXT,
    superseded_on=dt.date(2026, 12, 1),
    priority=catalog.HIGH_PRIORITY,  # a customer waits for the answer
)
catalog.declare(
    "message.received",
    version=2,
    required=IDS,
    description="an inbound message was stored (ids only: read the text from the message)",
)
catalog.declare(
    "message.sent",
    required=("direction", "conversation_id", "contact_id", "channel", "body", "message_id"),
    description=V1_CARRIED_TEXT,
    superseded_on=dt.date(2026, 12, 1),
)
catalog.declare(
    "message.sent",
    version=2,
    required=IDS,
    description="the channel accepted an outbound message (ids only)",
)
catalog.declare_all(
    {
        "message.delivered": ("message_id", "delivered_at"),
        "message.read": ("message_id", "read_at"),
        "message.failed": ("message_id", "error_code", "error_message", "retryable"),
        "system.contact_blocked_by_stop": ("contact_id", "keyword"),
        "system.send_blocked": ("contact_id", "reason"),
        "system.window_24h_expired": ("conversation_id", "contact_id", "expired_at"),
    },
    description=SEED,
    priorities={"message.failed": catalog.HIGH_PRIORITY},
)
catalog.declare(
    "system.session_changed",
    required=["session_id", "session", "from_status", "to_status"],
    description="whatsapp: a WAHA session's status changed (sync-sessions or its webhook)",
)
