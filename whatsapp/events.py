"""Event types the WhatsApp app emits that seed 000 §3 does not list (imported at start-up).

`message.received` and `message.sent` v2 (ids only, no text) are declared with the seed's
catalog in eventbus/catalog.py, next to the v1 they supersede.
"""

from __future__ import annotations

from eventbus import catalog

catalog.declare(
    "system.session_changed",
    required=["session_id", "session", "from_status", "to_status"],
    description="whatsapp: a WAHA session's status changed (sync-sessions or its webhook)",
)
