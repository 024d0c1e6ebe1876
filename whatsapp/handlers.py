"""The WhatsApp consumers (discovered at start-up)."""

from __future__ import annotations

import datetime as dt

import eventbus
from crm.models import Contact, Conversation, Message
from eventbus.store.tenancy import guard_payload
from whatsapp.conf import SEND_CONSUMER
from whatsapp.sending import send

MESSAGE_IDS = {"message_id": Message, "conversation_id": Conversation, "contact_id": Contact}


@eventbus.consumer(
    SEND_CONSUMER,
    events=["message.queued"],
    # The bus's table (8 attempts, 30 s ... 2 h); operators: EVENTBUS CONSUMER_MAX_ATTEMPTS.
    timeout=dt.timedelta(seconds=60),
    ordered=True,  # one conversation's messages go out in the order they were queued
)
def send_queued_message(event: eventbus.Event) -> None:
    """Send a queued WhatsApp message through the organization's WAHA session, exactly once
    (whatsapp.sending). Retryable failures raise (the bus backs off); the last attempt, or a
    failure no retry can cure (401, 422...), marks the message failed with `message.failed` and
    dead-letters the delivery (DLQ, its alert, and Reprocess to send it again)."""
    if event.payload.get("channel", "whatsapp") != "whatsapp":
        return
    guard_payload(event, MESSAGE_IDS)  # another tenant's message is never sent (audited)
    outcome = send(event.payload["message_id"], last_attempt=event.attempt >= event.max_attempts)
    if outcome.result == "failed":
        raise eventbus.PermanentError(f"WhatsApp send failed: {outcome.error_code}")
