"""The responder's prompt: instructions, RAG context and the conversation's recent history."""

from __future__ import annotations

from ai.conf import ai_settings
from ai.gateway import ChatMessage
from ai.handoff import HANDOFF_MARKER
from crm.models import Conversation, Message

SYSTEM = (
    "Você é o assistente de atendimento da loja no WhatsApp. Responda em português, de forma "
    "curta e cordial, usando apenas o contexto abaixo para fatos sobre produtos e políticas. "
    f"Se o cliente pedir uma pessoa, estiver irritado ou você não puder ajudar, responda apenas "
    f"{HANDOFF_MARKER}."
)


def build_prompt(
    *, conversation: Conversation, inbound: Message | None, text: str, context: list[str]
) -> list[ChatMessage]:
    """System instructions with the retrieved context, then the history, ending with `text`."""
    system = SYSTEM + ("\n\nContexto:\n" + "\n".join(context) if context else "")
    history = _history(conversation, inbound)
    return [ChatMessage("system", system), *history, ChatMessage("user", text)]


def _history(conversation: Conversation, inbound: Message | None) -> list[ChatMessage]:
    recent = Message.objects.filter(conversation=conversation).exclude(body="")
    if inbound is not None:
        recent = recent.exclude(pk=inbound.pk).filter(created_at__lte=inbound.created_at)
    rows = list(recent.order_by("-created_at")[: ai_settings.HISTORY_MESSAGES])
    return [
        ChatMessage("user" if m.direction == Message.Direction.INBOUND else "assistant", m.body)
        for m in reversed(rows)
    ]
