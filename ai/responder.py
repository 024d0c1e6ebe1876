"""ai-response-worker: answer an inbound message with the model, once.

Order: the inbound message must exist and be inbound, the bot on for its conversation, no AI
reply to it yet; an explicit request for a person or a negative sentiment hands off without a
model call; a message not classified yet is classified first (ai.sentiment, the same single
classification the sentiment worker would make: an angry message is handed off, never answered;
a failed classification is logged and the answer goes on). The organization's budget must allow
a call: when it is exhausted the contact gets AI_BUDGET_FALLBACK_MESSAGE and the conversation is
handed off. Then the prompt (history + RAG context; a failed query embedding is logged and the
answer goes on without context), the call, the charge, and the reply through
`crm.services.send_message` (which emits `message.queued`) together with `ai.responded`, in one
transaction. A reply that already exists
(a redelivery after a crash, a concurrent duplicate caught by `message_one_ai_reply_uniq`) is
"already replied": nothing is sent twice.
"""

from __future__ import annotations

import logging
import threading
import uuid
from contextlib import closing
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

import eventbus
from ai import metrics
from ai.budget import budget_charge, budget_release, budget_reserve, chat_estimate
from ai.conf import ai_settings
from ai.gateway import ChatMessage, ChatResult, GatewayError, gateway_for
from ai.handoff import NEGATIVE_SENTIMENTS, asks_for_human, handoff_trigger, model_wants_handoff
from ai.inbound import Inbound, resolve_inbound
from ai.prompts import build_prompt
from ai.rag.retrieval import retrieve
from ai.sentiment import classify_inbound
from core import flag_state
from crm.conversation_models import TemplateSuggestion
from crm.conversations import suggest_template, window_open
from crm.models import Message
from crm.services import send_message
from eventbus.store.models import EventLog

logger = logging.getLogger(__name__)
_pause = threading.Event()  # never set: an interruptible wait for a short Retry-After


def respond(event: eventbus.Event) -> str:
    """Handle one `message.received`; returns what happened (for logs, metrics and tests)."""
    inbound = resolve_inbound(event.organization_id, event.payload)
    outcome = _respond(event, inbound) if inbound is not None else "not_inbound"
    metrics.count_outcome(outcome)
    logger.info(
        "ai responder: %s",
        outcome,
        extra={"event_id": str(event.id), "organization_id": str(event.organization_id)},
    )
    return outcome


def _respond(event: eventbus.Event, inbound: Inbound) -> str:
    conversation = inbound.conversation
    skipped = _before_the_model(event, inbound)
    if skipped is not None:
        return skipped
    reserved = chat_estimate(inbound.text)
    if not budget_reserve(event.organization_id, reserved):  # check and charge in one statement
        _budget_fallback(inbound)
        return "throttled"
    try:
        result = _call_model(event, inbound)
    except BaseException:
        budget_release(event.organization_id, reserved)
        raise
    if result is None:
        budget_release(event.organization_id, reserved)
        return "handoff"
    budget_charge(
        event.organization_id,
        cost_cents=result.cost_cents,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        reserved_cents=reserved,
    )
    if model_wants_handoff(result.text):
        handoff_trigger(conversation=conversation, reason="model_requested")
        return "handoff"
    return _reply(event, inbound, result)


def _before_the_model(event: eventbus.Event, inbound: Inbound) -> str | None:
    """Why no model call is made (bot off, replied, handoff), or None to go on (the budget is
    checked, and the call reserved, by `budget_reserve` next)."""
    conversation = inbound.conversation
    stopped = (
        _switched_off(event, inbound)
        or ("already_replied" if _already_replied(event, inbound) else None)
        or _unreachable(event, inbound)  # blocked contact, closed window: no model call
    )
    if stopped:
        return stopped
    if asks_for_human(inbound.text):
        handoff_trigger(conversation=conversation, reason="human_requested")
        return "handoff"
    if inbound.message is not None and inbound.message.sentiment in NEGATIVE_SENTIMENTS:
        handoff_trigger(conversation=conversation, reason="negative_sentiment")
        return "handoff"
    if _classified_negative(event, inbound):
        return "handoff"  # classify_inbound handed it off
    return None


def _unreachable(event: eventbus.Event, inbound: Inbound) -> str | None:
    """No model call (nor a sentiment one) when no answer could be sent:

    - `contact_blocked`: the contact is blocked (STOP, an operator). The stop message itself
      gets nothing; a later message (the customer writes again without a start keyword) is
      handed to a person, who sees it on the handoffs screen and may unblock the contact.
    - `outside_window`: the message is answered after the 24-hour window closed (a backlog, a
      late retry): the agent gets a template suggestion instead.
    """
    conversation = inbound.conversation
    contact = conversation.contact
    if contact.blocked_at is not None:
        message = inbound.message
        if message is not None and message.created_at > contact.blocked_at:
            handoff_trigger(conversation=conversation, reason="blocked_contact_wrote")
        return "contact_blocked"
    wrote_at = inbound.message.created_at if inbound.message is not None else event.created_at
    if not window_open(conversation, inbound_at=wrote_at):
        suggest_template(
            conversation=conversation,
            reason=TemplateSuggestion.Reason.OUTSIDE_WINDOW,
            source_event_id=event.id,
        )
        return "outside_window"
    return None


def _classified_negative(event: eventbus.Event, inbound: Inbound) -> bool:
    """Classify a message the sentiment worker has not classified yet; True when negative."""
    if not ai_settings.SENTIMENT_BEFORE_REPLY or inbound.message is None:
        return False
    if inbound.message.sentiment is not None:
        return False
    try:
        label = classify_inbound(event.organization_id, inbound)
    except Exception as exc:  # the reply does not wait for a non-critical classification
        logger.warning(
            "ai responder: sentiment not classified before the reply (%s)",
            type(exc).__name__,
            extra={"event_id": str(event.id), "organization_id": str(event.organization_id)},
        )
        return False
    return label in NEGATIVE_SENTIMENTS


def _budget_fallback(inbound: Inbound) -> None:
    """The organization's AI budget is exhausted: tell the contact (the configured fallback
    message, once per inbound message) and hand the conversation to a person."""
    text = ai_settings.BUDGET_FALLBACK_MESSAGE.strip()
    if text and inbound.message is not None:
        send_message(
            conversation=inbound.conversation,
            body=text,
            sender=Message.Sender.AI,  # the bot's answer: one per inbound message (reply_to)
            reply_to=inbound.message,
        )
    handoff_trigger(conversation=inbound.conversation, reason="budget_exhausted")


def _switched_off(event: eventbus.Event, inbound: Inbound) -> str | None:
    """`disabled`: the organization's ai_responder flag is off (core.flags); `bot_inactive`:
    the bot is off for this conversation."""
    if not flag_state.enabled(event.organization_id, "ai_responder"):
        return "disabled"
    return None if inbound.conversation.bot_active else "bot_inactive"


def _already_replied(event: eventbus.Event, inbound: Inbound) -> bool:
    if inbound.message is not None:
        return Message.objects.filter(reply_to=inbound.message, sender=Message.Sender.AI).exists()
    return EventLog.objects.filter(
        organization_id=event.organization_id, idempotency_key=_responded_key(event, inbound)
    ).exists()


def _call_model(event: eventbus.Event, inbound: Inbound) -> ChatResult | None:
    """The model's answer; None after a handoff for repeated or permanent failure.

    Transient failures raise (the bus retries); a short Retry-After is waited for once here.
    """
    try:
        with closing(gateway_for(event.organization_id)) as gateway:
            prompt = _prompt(event, inbound, gateway)
            return _chat_once_more_after_short_wait(gateway, prompt)
    except GatewayError as exc:
        if exc.transient and event.attempt < ai_settings.HANDOFF_AFTER_FAILURES:
            raise
        handoff_trigger(conversation=inbound.conversation, reason="repeated_failures")
        if not exc.transient:
            raise eventbus.PermanentError(f"model call refused: {exc}") from exc
        return None


def _chat_once_more_after_short_wait(gateway: Any, prompt: list[ChatMessage]) -> ChatResult:
    try:
        result: ChatResult = gateway.chat(prompt)
        return result
    except GatewayError as exc:
        wait = exc.retry_after
        if not exc.transient or wait is None or wait > ai_settings.MAX_INLINE_RETRY_AFTER:
            raise
        _pause.wait(wait)
        result = gateway.chat(prompt)
        return result


def _prompt(event: eventbus.Event, inbound: Inbound, gateway: Any) -> list[ChatMessage]:
    try:
        context = retrieve(
            organization_id=event.organization_id,
            query=inbound.text,
            k=ai_settings.RAG_TOP_K,
            contact_id=inbound.conversation.contact_id,
            gateway=gateway,
        )
    except GatewayError as exc:  # the embedding failed: answer without retrieved context
        metrics.count_outcome("rag_unavailable")
        logger.warning(
            "ai responder: answering without RAG context, the query embedding failed (%s)",
            exc.error_class,
            extra={"event_id": str(event.id), "organization_id": str(event.organization_id)},
        )
        context = []
    return build_prompt(
        conversation=inbound.conversation,
        inbound=inbound.message,
        text=inbound.text,
        context=[c.content for c in context],
    )


def _reply(event: eventbus.Event, inbound: Inbound, result: ChatResult) -> str:
    """Queue the reply and emit `ai.responded` together; a reply that exists wins."""
    try:
        with transaction.atomic():
            if inbound.message is not None:
                # Serialises two runs for the same inbound message (a redelivery racing a slow
                # first run): the second sees the first's reply instead of a constraint error.
                # NO KEY: other writers' foreign-key checks on the row are not blocked.
                Message.objects.select_for_update(no_key=True).filter(pk=inbound.message.pk).first()
            if _already_replied(event, inbound):
                return "already_replied"
            started = timezone.now()
            reply = send_message(
                conversation=inbound.conversation,
                body=result.text,
                sender=Message.Sender.AI,
                reply_to=inbound.message,
            )
            if reply.created_at < started:  # send_message returned a reply written by another
                return "already_replied"
            _emit_responded(event, inbound, reply, result)
    except IntegrityError:  # a concurrent run replied first (message_one_ai_reply_uniq)
        return "already_replied"
    return "replied"


def _emit_responded(
    event: eventbus.Event, inbound: Inbound, reply: Message, result: ChatResult
) -> None:
    eventbus.emit(
        "ai.responded",
        organization=event.organization_id,
        entity_kind="message",
        entity_id=reply.pk,
        payload={
            "conversation_id": str(inbound.conversation.pk),
            "message_id": str(reply.pk),
            "reply_to_message_id": str(inbound.message.pk) if inbound.message else None,
            "model": result.model,
            "tokens_in": result.tokens_in,
            "tokens_out": result.tokens_out,
            "cost_cents": round(result.cost_cents, 4),
            "latency_ms": result.latency_ms,
        },
        idempotency_key=_responded_key(event, inbound),
    )


def _responded_key(event: eventbus.Event, inbound: Inbound) -> str:
    source: uuid.UUID | str = inbound.message.pk if inbound.message is not None else event.id
    return f"ai.responded:{source}"
