"""The CRM's event types: its leads, contacts, conversations, orders and the send command.

Doors (eventbus.store.catalog): the lead facts (`lead.*`, `lead_activity.recorded`) are open to the
integrators' API and to pipelines: an integrator records what its own systems know about its own
leads (a web form, an ERP closing a deal), and nothing the platform runs acts on them beyond
re-indexing the lead for the assistant (inside the event's tenant). Everything else is the CRM's
alone: contacts and conversations are created by the channels (an event claiming one would
describe a row that does not exist), `order.confirmed` starts the order.post pipelines (an order
is confirmed by `POST /api/v1/orders`, not by an event), and `message.queued` is a command the
send worker obeys.

Producers (docs/crm.md, "Leads"): `lead.created` and `lead_activity.recorded` from
`crm.services`, the other `lead.*` from the database (triggers and `mark_lead_won` /
`mark_lead_lost`, crm/migrations/0009, core/migrations/0002); tests/crm/test_producers.py checks
that every declared type has one.
"""

from __future__ import annotations

from eventbus.store import catalog

OPEN = (catalog.API, catalog.PIPELINE)
SEED = "seed 000 §3"

catalog.declare_all(
    {
        "lead.created": ("name", "source", "pipeline_id", "stage_id"),
        "lead.updated": ("changes",),
        "lead.stage_changed": ("from_stage_id", "to_stage_id"),
        "lead.won": ("value", "won_at"),
        "lead.lost": ("reason", "lost_at"),
        "lead.assigned": ("to_owner_id",),
        "lead.deleted": ("soft", "deleted_by"),
        "lead_activity.recorded": ("activity_type", "lead_id", "content_excerpt"),
    },
    description=SEED,
    doors=OPEN,
)
catalog.declare_all(
    {
        # The seed's `phone` and `name` stay out: webhooks carry this event (read the contact
        # by its id through the contacts API).
        "contact.created": ("contact_id", "source"),
        "contact.merged": ("from_contact_id", "into_contact_id", "merged_fields"),
        "contact.blocked": ("reason",),
        "contact.anonymized": ("lgpd_request_id", "anonymized_fields"),
        "conversation.opened": ("conversation_id", "contact_id", "channel"),
        "conversation.assigned": ("to_user_id", "mode"),
        "conversation.resolved": ("resolved_by", "duration_s"),
        "conversation.reopened": ("reopened_by",),
    },
    description=SEED,
    # A customer waits for a conversation to be picked up.
    priorities={"conversation.opened": catalog.HIGH_PRIORITY},
)

# Seed 000 §6.1 uses `message.queued` between the CRM and the send worker.
catalog.declare(
    "message.queued",
    required=["message_id", "conversation_id", "contact_id", "channel"],
    description="crm: send_message queued an outbound message; the channel's worker sends it",
    priority=catalog.HIGH_PRIORITY,  # a customer waits for it
)
catalog.declare(
    "order.confirmed",
    required=("order_id", "number", "total_cents", "currency", "confirmed_at"),
    description="seed 004: an order was confirmed (fat event: the order summary)",
)

from crm import conversation_events  # noqa: E402, F401  (conversation.sla_breached)
