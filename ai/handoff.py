"""Handoff to a human: the rules that call for one, and the switch that turns the bot off.

A conversation goes to a human when the contact asks for one (keywords), when the model's answer
says so (`HANDOFF_MARKER`), after repeated failures to answer, or on negative sentiment.
`handoff_trigger` turns `bot_active` off and emits `ai.handoff_triggered` (NOTIFY) in one
transaction, once: a conversation already handed off changes nothing and emits nothing.
"""

from __future__ import annotations

import re

from django.db import transaction

import eventbus
from ai import metrics
from ai.words import normalized_words
from crm.models import Conversation

# The model is told to answer exactly this when a person should take over.
HANDOFF_MARKER = "[HANDOFF]"
NEGATIVE_SENTIMENTS = frozenset({"angry", "frustrated"})
# Words (accents and case folded) of an explicit request for a person.
HUMAN_WORDS = frozenset({"atendente", "humano", "humana", "pessoa", "gerente", "operador"})
# Matched on the words without stop words ("falar com alguém" -> "falar alguem").
HUMAN_PHRASES = (re.compile(r"\bfalar (alguem|gente de verdade)\b"),)


def asks_for_human(text: str) -> bool:
    """An explicit request for a person ("quero falar com um atendente", "humano!")."""
    words = normalized_words(text)
    if HUMAN_WORDS.intersection(words):
        return True
    plain = " ".join(words)
    return any(p.search(plain) for p in HUMAN_PHRASES)


def model_wants_handoff(reply: str) -> bool:
    return HANDOFF_MARKER in reply


def handoff_trigger(*, conversation: Conversation, reason: str) -> bool:
    """Turn the bot off and emit `ai.handoff_triggered`; False when it was already off."""
    with transaction.atomic():
        changed = Conversation.objects.filter(pk=conversation.pk, bot_active=True).update(
            bot_active=False
        )
        if not changed:
            return False
        eventbus.emit(
            "ai.handoff_triggered",
            organization=conversation.organization_id,
            entity_kind="conversation",
            entity_id=conversation.pk,
            payload={"conversation_id": str(conversation.pk), "reason": reason, "from": "bot"},
        )
    conversation.bot_active = False
    metrics.count_outcome(f"handoff_{reason}")
    return True
