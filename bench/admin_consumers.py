"""No-op consumers for bench/admin_changelists.py: realistic names over the seed catalog's types.

Loaded only through `EVENTBUS_HANDLER_MODULES=bench.admin_consumers` in that benchmark's scratch
database, so the DLQ's filter choices come from a registry, as in production.
"""

from __future__ import annotations

from eventbus.store.event import Event
from eventbus.store.registry import consumer

ROUTES: dict[str, tuple[str, ...]] = {
    "crm-sync-worker": ("lead.created", "lead.stage_changed", "lead.won", "contact.created"),
    "ai-suggest-worker": ("message.received",),  # not ai-response-worker: the ai app has it
    "webhook-fanout-worker": ("lead.created", "message.received", "message.sent", "lead.won"),
    "analytics-worker": ("conversation.opened", "message.delivered", "message.sent"),
}


def noop(event: Event) -> None:
    """The benchmark never runs handlers; it reads what they left behind."""


for _name, _events in ROUTES.items():
    consumer(_name, events=list(_events))(noop)
