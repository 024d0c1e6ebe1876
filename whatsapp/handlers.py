"""The WhatsApp consumers (discovered at start-up)."""

from __future__ import annotations

import datetime as dt

import eventbus
from whatsapp.conf import SEND_CONSUMER
from whatsapp.sending import send


@eventbus.consumer(
    SEND_CONSUMER,
    events=["message.queued"],
    max_attempts=6,  # operators: EVENTBUS CONSUMER_MAX_ATTEMPTS
    timeout=dt.timedelta(seconds=60),
    ordered=True,  # one conversation's messages go out in the order they were queued
)
def send_queued_message(event: eventbus.Event) -> None:
    """Send a queued WhatsApp message through the organization's WAHA session, exactly once
    (whatsapp.sending). Retryable failures raise (the bus backs off); the last attempt marks the
    message failed with `message.failed` instead."""
    if event.payload.get("channel", "whatsapp") != "whatsapp":
        return
    send(event.payload["message_id"], last_attempt=event.attempt >= event.max_attempts)
