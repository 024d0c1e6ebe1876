"""ai-response-worker in process (the drain's own claim and settle): both payload versions,
idempotency (a redelivery, a concurrent duplicate), handoff by the model or after repeated
failures, a permanent refusal, a short Retry-After waited for once, the bot switched off."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from ai import responder
from ai.handoff import HANDOFF_MARKER, asks_for_human
from core.models import Organization
from crm.models import Conversation, Message
from crm.services import send_message
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from tests.support.ai_messages import ai_replies, receive
from tests.support.db import raw_connection
from tests.support.factories import ConversationFactory
from tests.support.openai_fake import CHAT, Failure, OpenAIFake

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(org: Organization, ai_on_fake: OpenAIFake, settings: Any) -> Conversation:
    # The responder's own model calls only: its sentiment check before the reply (one more call
    # the fake's failures would hit first) is tested in test_responder_guards.
    settings.AI = {**settings.AI, "SENTIMENT_BEFORE_REPLY": False}
    return ConversationFactory(organization=org)


@pytest.fixture
def clock() -> Iterator[time_machine.Coordinates]:
    with time_machine.travel(timezone.now(), tick=True) as traveller:
        yield traveller


def run_responder() -> None:
    Worker(
        WorkerOptions(consumers=["ai-response-worker"], once=True, listen=False, startup_jitter=0)
    ).run()


def delivery() -> Delivery:
    return Delivery.objects.get(consumer="ai-response-worker")


def handoffs() -> list[dict[str, Any]]:
    return [e.payload for e in EventLog.objects.filter(event_type="ai.handoff_triggered")]


@pytest.mark.parametrize("version", [1, 2])
def test_both_payload_versions_are_answered_from_the_message_row(
    conversation: Conversation, ai_on_fake: OpenAIFake, version: int
) -> None:
    inbound, event = receive(conversation, "Vocês entregam em Campinas?", version=version)
    assert ("body" in event.payload) is (version == 1)
    Message.objects.filter(pk=inbound.pk).update(body="Vocês entregam em Campinas hoje?")
    run_responder()
    (reply,) = ai_replies(inbound)
    assert reply.body == "Eco: Vocês entregam em Campinas hoje?"  # the row's text, not the event's
    assert delivery().status == "done"


def test_the_prompt_carries_the_conversation_history(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    first, _ = receive(conversation, "Oi")
    run_responder()
    receive(conversation, "E o frete?")
    run_responder()
    sent = ai_on_fake.calls(CHAT)[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent[1:]] == ["Oi", "Eco: Oi", "E o frete?"]
    assert len(ai_replies(first)) == 1


def test_a_redelivered_message_that_was_already_answered_calls_nothing(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    inbound, _ = receive(conversation, "Oi")
    send_message(conversation=conversation, body="já respondido", sender="ai", reply_to=inbound)
    run_responder()
    assert [r.body for r in ai_replies(inbound)] == ["já respondido"]
    assert ai_on_fake.calls(CHAT) == []
    assert delivery().status == "done"


def commit_other_reply(inbound: Message) -> None:
    """Another worker's reply to `inbound`, committed on its own connection."""
    with raw_connection() as other:
        other.execute(
            """
            INSERT INTO deskcomm_message (id, organization_id, conversation_id, direction, status,
                sender, body, media_urls, is_template, reply_to_id, external_id, attempts,
                error_code, error_message, created_at, updated_at)
            VALUES (%s, %s, %s, 'outbound', 'queued', 'ai', 'a outra', '[]', false, %s, '', 0,
                '', '', now() - interval '1 second', now())
            """,
            [uuid.uuid4(), inbound.organization_id, inbound.conversation_id, inbound.pk],
        )


@pytest.mark.parametrize("insert", ["through_send_message", "past_its_check"])
def test_a_concurrent_duplicate_reply_is_taken_as_already_replied(
    conversation: Conversation,
    ai_on_fake: OpenAIFake,
    monkeypatch: pytest.MonkeyPatch,
    insert: str,
) -> None:
    inbound, _ = receive(conversation, "Oi")
    real_check = responder._already_replied
    missed = iter([False, False])  # both of our checks run before the other reply commits

    def racing_check(event: Any, found: Any) -> bool:
        if next(missed, True) is False:
            return False
        return real_check(event, found)

    def racing_send(**kwargs: Any) -> Message:
        commit_other_reply(inbound)
        if insert == "through_send_message":  # its own check finds the other reply
            return send_message(**kwargs)
        return Message.objects.create(  # its check missed too: the unique constraint refuses
            organization_id=conversation.organization_id,
            conversation=conversation,
            direction="outbound",
            status="queued",
            sender="ai",
            body=kwargs["body"],
            reply_to=inbound,
        )

    monkeypatch.setattr(responder, "_already_replied", racing_check)
    monkeypatch.setattr(responder, "send_message", racing_send)
    run_responder()
    assert [r.body for r in ai_replies(inbound)] == ["a outra"]
    assert not EventLog.objects.filter(event_type="ai.responded").exists()
    assert delivery().status == "done"


def test_the_model_asking_for_a_human_hands_off_without_replying(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.reply_text = HANDOFF_MARKER
    inbound, _ = receive(conversation, "Meu pedido veio quebrado")
    run_responder()
    conversation.refresh_from_db()
    assert conversation.bot_active is False and ai_replies(inbound) == []
    assert [h["reason"] for h in handoffs()] == ["model_requested"]


def test_repeated_transient_failures_hand_off_at_the_third_attempt(
    conversation: Conversation, ai_on_fake: OpenAIFake, clock: time_machine.Coordinates
) -> None:
    ai_on_fake.fail_next(CHAT, Failure(500), Failure(502), Failure(503))
    inbound, _ = receive(conversation, "Oi")
    run_responder()
    assert (delivery().status, delivery().attempts) == ("pending", 1)
    for _ in range(2):
        clock.shift(dt.timedelta(minutes=3))
        run_responder()
    assert (delivery().status, delivery().attempts) == ("done", 3)
    conversation.refresh_from_db()
    assert conversation.bot_active is False and ai_replies(inbound) == []
    assert [h["reason"] for h in handoffs()] == ["repeated_failures"]


def test_a_permanent_refusal_dead_letters_and_hands_off(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.fail_next(CHAT, Failure(401))
    receive(conversation, "Oi")
    run_responder()
    assert delivery().status == "dead"
    assert "PermanentError" in delivery().last_error
    assert [h["reason"] for h in handoffs()] == ["repeated_failures"]


def test_a_short_retry_after_is_waited_for_once_in_the_handler(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.fail_next(CHAT, Failure(429, retry_after="0.2"))
    inbound, _ = receive(conversation, "Oi")
    run_responder()
    assert len(ai_replies(inbound)) == 1
    assert len(ai_on_fake.calls(CHAT)) == 2 and delivery().attempts == 1


def test_a_long_retry_after_goes_back_to_the_bus(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.fail_next(CHAT, Failure(429, retry_after="120"))
    receive(conversation, "Oi")
    run_responder()
    assert (delivery().status, delivery().attempts) == ("pending", 1)
    assert "GatewayError" in delivery().last_error
    assert len(ai_on_fake.calls(CHAT)) == 1


def test_no_reply_while_the_bot_is_off_or_for_an_outbound_message(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(bot_active=False)
    inbound, _ = receive(conversation, "Oi")
    run_responder()
    assert ai_replies(inbound) == [] and ai_on_fake.calls(CHAT) == []


def test_a_negative_sentiment_already_stored_hands_off(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    inbound, _ = receive(conversation, "Isso é um absurdo")
    Message.objects.filter(pk=inbound.pk).update(sentiment="angry", sentiment_score=-0.9)
    run_responder()
    assert [h["reason"] for h in handoffs()] == ["negative_sentiment"]
    assert ai_on_fake.calls(CHAT) == []


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Quero falar com um ATENDENTE", True),
        ("me passa pra um humano", True),
        ("posso falar com alguém?", True),
        ("Qual o preço do tênis?", False),
        ("obrigado!", False),
    ],
)
def test_explicit_requests_for_a_person_are_recognised(text: str, asks: bool) -> None:
    assert asks_for_human(text) is asks


def test_the_prompt_carries_the_retrieved_context_of_the_organization(
    conversation: Conversation, ai_on_fake: OpenAIFake, org_b: Organization
) -> None:
    from ai.rag.indexer import source_index
    from crm.models import Product

    mine = Product.objects.create(
        organization_id=conversation.organization_id, name="Bota Trilha", description="Couro."
    )
    theirs = Product.objects.create(organization=org_b, name="Outra loja", description="Nada.")
    for item in (mine, theirs):
        source_index(organization_id=item.organization_id, kind="product", source_id=str(item.pk))
    receive(conversation, "Tem bota?")
    run_responder()
    system = ai_on_fake.calls(CHAT)[-1]["messages"][0]["content"]
    assert "Contexto:\nProduto: Bota Trilha. Couro." in system
    assert "Outra loja" not in system
    assert ai_on_fake.calls("/v1/embeddings")[-1]["input"] == ["Tem bota?"]


def test_the_tenants_ai_responder_flag_switches_the_responder_off_and_on(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    Organization.objects.filter(pk=conversation.organization_id).update(
        feature_flags={"ai_responder": False}
    )
    off, _ = receive(conversation, "Tem em estoque?")
    run_responder()
    assert ai_replies(off) == [] and ai_on_fake.calls(CHAT) == []
    assert delivery().status == "done"  # skipped, not retried
    Organization.objects.filter(pk=conversation.organization_id).update(
        feature_flags={"ai_responder": True}
    )
    on, _ = receive(conversation, "E agora?")
    run_responder()
    (reply,) = ai_replies(on)
    assert reply.body == "Eco: E agora?"
