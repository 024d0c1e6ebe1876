"""ai-sentiment-worker: stores the sentiment once, alerts and hands off on anger, and its
failures never hold up the responder."""

from __future__ import annotations

import pytest

from ai.sentiment import parse_sentiment
from core.models import Organization
from crm.models import Conversation, Message
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from tests.support.ai_messages import ai_replies, receive
from tests.support.factories import ConversationFactory
from tests.support.openai_fake import CHAT, Failure, OpenAIFake

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def conversation(org: Organization, ai_on_fake: OpenAIFake) -> Conversation:
    return ConversationFactory(organization=org)


def run(*consumers: str) -> None:
    Worker(
        WorkerOptions(consumers=list(consumers), once=True, listen=False, startup_jitter=0)
    ).run()


def test_an_angry_message_is_stored_alerted_and_handed_off_once(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.reply_text = '{"sentiment": "angry", "score": -0.85}'
    inbound, _ = receive(conversation, "Vocês são um absurdo, cadê meu pedido?")
    run("ai-sentiment-worker")
    inbound.refresh_from_db()
    assert (inbound.sentiment, inbound.sentiment_score) == ("angry", -0.85)
    (alert,) = EventLog.objects.filter(event_type="ai.sentiment_alert")
    assert alert.payload == {
        "conversation_id": str(conversation.pk),
        "sentiment": "angry",
        "score": -0.85,
    }
    conversation.refresh_from_db()
    assert conversation.bot_active is False
    (handoff,) = EventLog.objects.filter(event_type="ai.handoff_triggered")
    assert handoff.payload["reason"] == "negative_sentiment"
    assert ai_on_fake.calls(CHAT)[0]["model"] == "fake-chat"  # AI_SENTIMENT_MODEL unset


def test_a_classified_message_is_not_classified_again(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    inbound, _ = receive(conversation, "Obrigado!")
    Message.objects.filter(pk=inbound.pk).update(sentiment="positive", sentiment_score=0.9)
    run("ai-sentiment-worker")
    assert ai_on_fake.calls(CHAT) == []
    assert Delivery.objects.get(consumer="ai-sentiment-worker").status == "done"


def test_a_failing_sentiment_call_does_not_hold_up_the_reply(
    conversation: Conversation, ai_on_fake: OpenAIFake
) -> None:
    ai_on_fake.reply_text = '{"sentiment": "neutral", "score": 0}'
    inbound, _ = receive(conversation, "Oi")
    ai_on_fake.fail_next(CHAT, Failure(500))  # whichever consumer calls first fails once
    run("ai-sentiment-worker")
    run("ai-response-worker")
    assert len(ai_replies(inbound)) == 1
    states = dict(
        Delivery.objects.filter(consumer__startswith="ai-").values_list("consumer", "status")
    )
    assert states == {"ai-sentiment-worker": "pending", "ai-response-worker": "done"}
    inbound.refresh_from_db()
    assert inbound.sentiment == "neutral"  # classified by the responder before it answered


@pytest.mark.parametrize(
    ("answer", "parsed"),
    [
        ('{"sentiment": "frustrated", "score": -0.4}', ("frustrated", -0.4)),
        ('Claro: {"sentiment": "POSITIVE", "score": 3}', ("positive", 1.0)),
        ('{"sentiment": "sarcastic", "score": 0.1}', ("neutral", 0.1)),
        ("não sei", ("neutral", 0.0)),
    ],
)
def test_the_model_s_answer_is_read_defensively(answer: str, parsed: tuple[str, float]) -> None:
    assert parse_sentiment(answer) == parsed
