"""The AI app's consumers (discovered at start-up)."""

from __future__ import annotations

import datetime as dt

import eventbus
from ai.rag.handlers import index_sources, named_sources
from ai.responder import respond
from ai.sentiment import classify_message
from crm.models import Contact, Conversation, Message
from eventbus.store.tenancy import guard_ids, guard_payload

MESSAGE_IDS = {"message_id": Message, "conversation_id": Conversation, "contact_id": Contact}


@eventbus.consumer(
    "ai-response-worker",
    events=["message.received"],
    max_attempts=5,
    timeout=dt.timedelta(seconds=120),  # a model call is bounded by AI_TIMEOUT (30 s) and one wait
    ordered=True,  # one conversation's messages answered one at a time, in arrival order
)
def ai_response(event: eventbus.Event) -> None:
    """Answer an inbound message with the model, once (seed 000 §6.2)."""
    guard_payload(event, MESSAGE_IDS)
    respond(event)


@eventbus.consumer("ai-sentiment-worker", events=["message.received"], max_attempts=3)
def ai_sentiment(event: eventbus.Event) -> None:
    """Classify an inbound message's sentiment, once (seed 000 §6.3; non-critical)."""
    guard_payload(event, MESSAGE_IDS)
    classify_message(event)


@eventbus.consumer(
    "rag-indexer-worker",
    events=[
        "nuvemshop.product_synced",
        "contact.created",
        "contact.merged",
        "lead.created",
        "lead.updated",
        "knowledge.article_changed",
    ],
    max_attempts=5,
)
def rag_indexer(event: eventbus.Event) -> None:
    """Re-index the sources an event is about (seed 000 §6.8)."""
    guard_ids(event, named_sources(event))
    index_sources(event)
