"""What the responder does before and around the model (issue 41): an angry message is handed
off before any answer, a failed query embedding does not block the answer, and a contact who
writes while the budget is exhausted gets the fallback message and a person."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from ai.budget import account_for
from ai.models import AiAccount
from core.models import Organization
from crm.models import Conversation, Message
from eventbus.store.models import EventLog
from tests.ai.test_responder import handoffs, run_responder
from tests.support.ai_messages import ai_replies, receive
from tests.support.factories import ConversationFactory
from tests.support.openai_fake import CHAT, EMBEDDINGS, Failure, OpenAIFake

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(org: Organization, ai_on_fake: OpenAIFake, settings: Any) -> Conversation:
    settings.AI = {**settings.AI, "SENTIMENT_MODEL": "fake-sentiment"}
    return ConversationFactory(organization=org)


def test_an_angry_message_is_handed_off_before_any_answer(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.model_replies["fake-sentiment"] = '{"sentiment": "angry", "score": -0.9}'
    inbound, _ = receive(conversation, "Vocês são uma piada, cadê meu pedido?!")
    run_responder()  # before the sentiment worker got to it
    assert ai_replies(inbound) == []
    assert [h["reason"] for h in handoffs()] == ["negative_sentiment"]
    assert [c["model"] for c in ai_on_fake.calls(CHAT)] == ["fake-sentiment"]  # no answer asked
    inbound.refresh_from_db()
    assert inbound.sentiment == "angry"
    assert EventLog.objects.filter(event_type="ai.sentiment_alert").count() == 1


def test_a_calm_message_is_classified_once_and_answered(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    from eventbus.dispatch.worker import Worker, WorkerOptions

    ai_on_fake.model_replies["fake-sentiment"] = '{"sentiment": "neutral", "score": 0.1}'
    inbound, _ = receive(conversation, "Qual o prazo de entrega?")
    run_responder()
    Worker(
        WorkerOptions(consumers=["ai-sentiment-worker"], once=True, listen=False, startup_jitter=0)
    ).run()
    (reply,) = ai_replies(inbound)
    assert reply.body == "Eco: Qual o prazo de entrega?"
    assert [c["model"] for c in ai_on_fake.calls(CHAT)] == ["fake-sentiment", "fake-chat"]


def test_a_failed_embedding_answers_without_context_and_is_logged(
    conversation: Conversation, ai_on_fake: OpenAIFake, caplog: pytest.LogCaptureFixture
) -> None:
    from ai.rag.indexer import source_index
    from crm.models import Product

    product = Product.objects.create(
        organization_id=conversation.organization_id, name="Bota Trilha", description="Couro."
    )
    source_index(organization_id=product.organization_id, kind="product", source_id=str(product.pk))
    ai_on_fake.fail_next(EMBEDDINGS, *[Failure(status=500)] * 5)
    inbound, _ = receive(conversation, "Tem bota?")
    with caplog.at_level(logging.WARNING, logger="ai.responder"):
        run_responder()
    (reply,) = ai_replies(inbound)
    assert reply.status == Message.Status.QUEUED
    system = ai_on_fake.calls(CHAT)[-1]["messages"][0]["content"]
    assert "Bota Trilha" not in system  # no retrieved context
    assert "answering without RAG context" in caplog.text
    assert handoffs() == []


def test_a_contact_writing_while_the_budget_is_exhausted_gets_the_fallback_and_a_person(
    conversation: Conversation, ai_on_fake: OpenAIFake, settings: Any
) -> None:
    settings.AI = {**settings.AI, "BUDGET_FALLBACK_MESSAGE": "Já já um atendente responde."}
    account = account_for(conversation.organization_id)
    AiAccount.objects.filter(pk=account.pk).update(daily_budget_cents=0)
    inbound, _ = receive(conversation, "Oi, tudo bem?")
    run_responder()
    (reply,) = ai_replies(inbound)
    assert reply.body == "Já já um atendente responde."
    assert [h["reason"] for h in handoffs()] == ["budget_exhausted"]
    assert ai_on_fake.calls(CHAT) == []  # no model call at all
    assert EventLog.objects.filter(event_type="message.queued", entity_id=reply.pk).exists()
    conversation.refresh_from_db()
    assert conversation.bot_active is False


def test_no_model_call_for_a_blocked_contact(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    from django.utils import timezone

    from crm.models import Contact

    Contact.objects.filter(pk=conversation.contact_id).update(
        blocked_at=timezone.now(), blocked_reason="stop_keyword"
    )
    inbound, _ = receive(conversation, "Oi, ainda estão aí?")  # wrote again after STOP
    run_responder()
    assert ai_on_fake.requests == []  # the fake model server saw nothing
    assert ai_replies(inbound) == []
    assert [h["reason"] for h in handoffs()] == ["blocked_contact_wrote"]


def test_no_model_call_outside_the_window_but_a_template_suggestion(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    import datetime as dt

    import time_machine
    from django.utils import timezone

    from crm.conversation_models import TemplateSuggestion

    inbound, _ = receive(conversation, "Qual o prazo?")
    with time_machine.travel(timezone.now() + dt.timedelta(hours=25)):
        run_responder()  # a backlog answered after the window closed
    assert ai_on_fake.requests == []  # the fake model server saw nothing
    assert ai_replies(inbound) == []
    (suggestion,) = TemplateSuggestion.objects.all()
    assert (suggestion.conversation_id, suggestion.reason) == (conversation.pk, "outside_window")


def test_the_stop_message_itself_is_neither_answered_nor_handed_off(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    from django.utils import timezone

    from crm.models import Contact

    inbound, _ = receive(conversation, "SAIR")
    Contact.objects.filter(pk=conversation.contact_id).update(
        blocked_at=timezone.now(), blocked_reason="stop_keyword"
    )  # blocked by this very message (whatsapp.inbound does it in the same transaction)
    run_responder()
    assert ai_on_fake.requests == []
    assert ai_replies(inbound) == [] and handoffs() == []
