"""ai-sentiment-worker: classify an inbound message's sentiment once, with a cheap model.

Stores `Message.sentiment` / `sentiment_score` (a message already classified is skipped), emits
`ai.sentiment_alert` for angry or frustrated messages and hands the conversation to a human.
Non-critical: its own consumer, few attempts, and a failure here never touches the responder's
delivery. Skipped while the organization's budget is exhausted.
"""

from __future__ import annotations

import json
import logging
import uuid
from contextlib import closing

from django.db import transaction

import eventbus
from ai import metrics
from ai.budget import budget_charge, budget_release, budget_reserve, chat_estimate
from ai.conf import ai_settings
from ai.gateway import ChatMessage, GatewayError, gateway_for
from ai.handoff import NEGATIVE_SENTIMENTS, handoff_trigger
from ai.inbound import Inbound, resolve_inbound
from crm.models import Message

logger = logging.getLogger(__name__)
LABELS = frozenset({"positive", "neutral", "negative", "angry", "frustrated"})
INSTRUCTIONS = (
    "Classify the sentiment of the customer's message. Answer with JSON only: "
    '{"sentiment": "positive|neutral|negative|angry|frustrated", "score": -1.0..1.0}'
)


def classify_message(event: eventbus.Event) -> str:
    """Handle one `message.received`; returns the label stored, or why nothing was."""
    inbound = resolve_inbound(event.organization_id, event.payload)
    if inbound is None or inbound.message is None:
        return "not_inbound"
    return classify_inbound(event.organization_id, inbound)


def classify_inbound(organization_id: uuid.UUID, inbound: Inbound) -> str:
    """Classify, store, alert and hand off (negative) one inbound message, unless it is
    classified already; also run by the responder before it answers (ai.responder)."""
    if inbound.message is None:
        return "not_inbound"
    if inbound.message.sentiment is not None:
        return "already_classified"
    reserved = chat_estimate(inbound.text)
    if not inbound.text.strip() or not budget_reserve(organization_id, reserved):
        return "skipped"
    label, score = _classify(organization_id, inbound.text, reserved)
    with transaction.atomic():
        stored = Message.objects.filter(pk=inbound.message.pk, sentiment__isnull=True).update(
            sentiment=label, sentiment_score=score
        )
        if stored and label in NEGATIVE_SENTIMENTS:
            eventbus.emit(
                "ai.sentiment_alert",
                organization=organization_id,
                entity_kind="message",
                entity_id=inbound.message.pk,
                payload={
                    "conversation_id": str(inbound.conversation.pk),
                    "sentiment": label,
                    "score": score,
                },
                idempotency_key=f"ai.sentiment_alert:{inbound.message.pk}",
            )
    if stored:
        inbound.message.sentiment, inbound.message.sentiment_score = label, score
    if stored and label in NEGATIVE_SENTIMENTS:
        handoff_trigger(conversation=inbound.conversation, reason="negative_sentiment")
    return label if stored else "already_classified"


def _classify(organization_id: uuid.UUID, text: str, reserved: float) -> tuple[str, float]:
    model = ai_settings.SENTIMENT_MODEL or ai_settings.CHAT_MODEL
    prompt = [ChatMessage("system", INSTRUCTIONS), ChatMessage("user", text)]
    try:
        with closing(gateway_for(organization_id)) as gateway:
            result = gateway.chat(prompt, model=model)
    except BaseException as exc:
        budget_release(organization_id, reserved)  # no call made, or none to pay for
        if isinstance(exc, GatewayError) and not exc.transient:
            raise eventbus.PermanentError(f"sentiment call refused: {exc}") from exc
        raise
    budget_charge(
        organization_id,
        cost_cents=result.cost_cents,
        tokens_in=result.tokens_in,
        tokens_out=result.tokens_out,
        reserved_cents=reserved,
    )
    metrics.count_outcome("sentiment_classified")
    return parse_sentiment(result.text)


def parse_sentiment(text: str) -> tuple[str, float]:
    """The label and score of the model's JSON answer; unreadable answers are neutral."""
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start : end + 1]) if start >= 0 else {}
        label = str(data.get("sentiment", "neutral")).lower()
        score = max(-1.0, min(1.0, float(data.get("score", 0.0))))
    except (ValueError, TypeError, AttributeError):
        logger.warning("unreadable sentiment answer; stored as neutral")
        return "neutral", 0.0
    return (label if label in LABELS else "neutral"), score
