"""The AI workers end to end, in real `drain_events` subprocesses against the fake
OpenAI-compatible server: one reply per inbound message (also after a SIGKILL once the model has
answered), `ai.responded` with tokens and cost, budget warning and throttling, handoff."""

from __future__ import annotations

import datetime as dt
import signal
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from ai.conf import DEFAULT_BUDGET_FALLBACK_MESSAGE
from ai.models import AiAccount
from core.models import Organization
from crm.models import Conversation, Message
from eventbus.dispatch import claim as claims
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from tests.support.ai_messages import ai_replies, receive
from tests.support.factories import ConversationFactory
from tests.support.openai_fake import CHAT, OpenAIFake, openai_fake
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RESPONDER = ("--consumer", "ai-response-worker")


@pytest.fixture
def fake() -> Iterator[OpenAIFake]:
    with openai_fake() as server:
        yield server


@pytest.fixture
def conversation(org: Organization) -> Conversation:
    return ConversationFactory(organization=org)


AI_FALLBACK = DEFAULT_BUDGET_FALLBACK_MESSAGE


def ai_env(fake: OpenAIFake) -> dict[str, str]:
    """The subprocess's settings: the fake as provider (loopback allowed, as in development)."""
    return {
        "AI_BASE_URL": fake.base_url,
        "AI_API_KEY": "sk-e2e",
        "AI_CHAT_MODEL": "fake-chat",
        "AI_TIMEOUT": "10",
        "OUTBOUND_HTTP_ALLOW_PRIVATE": "true",
        # The reply's calls only (the sentiment check before it: test_responder_guards).
        "AI_SENTIMENT_BEFORE_REPLY": "false",
        # 1 cent per input token, 2 per output token: a call of the fake (42 in, 7 out) = 56 c.
        "AI_PRICE_INPUT_CENTS_PER_MTOK": "1000000",
        "AI_PRICE_OUTPUT_CENTS_PER_MTOK": "2000000",
    }


def drain_once(fake: OpenAIFake, processes: list[Drain]) -> None:
    drain = start_drain("--once", *RESPONDER, **ai_env(fake))
    processes.append(drain)
    assert drain.wait(timeout=180) == 0, drain.output()


def events(event_type: str) -> list[EventLog]:
    return list(EventLog.objects.filter(event_type=event_type).order_by("created_at"))


def test_an_inbound_message_gets_one_reply_queued_and_ai_responded(
    conversation: Conversation, fake: OpenAIFake, processes: list[Drain]
) -> None:
    fake.reply_text = "Temos sim! O tênis custa R$ 299."
    inbound, _ = receive(conversation, "Vocês têm o tênis azul?")
    drain_once(fake, processes)
    drain_once(fake, processes)  # a second pass changes nothing

    (reply,) = ai_replies(inbound)
    assert (reply.body, reply.status, reply.direction) == (fake.reply_text, "queued", "outbound")
    (queued,) = events("message.queued")
    assert queued.payload["message_id"] == str(reply.pk)
    (responded,) = events("ai.responded")
    assert responded.payload["message_id"] == str(reply.pk)
    assert responded.payload["model"] == "fake-chat"
    assert (responded.payload["tokens_in"], responded.payload["tokens_out"]) == (42, 7)
    assert responded.payload["cost_cents"] == 56
    assert responded.payload["latency_ms"] >= 0
    assert len(fake.calls(CHAT)) == 1
    assert AiAccount.objects.get(pk=conversation.organization_id).spent_cents == Decimal(56)


def test_a_worker_killed_after_the_model_answered_never_sends_two_replies(
    conversation: Conversation, fake: OpenAIFake, processes: list[Drain], settings: Any
) -> None:
    inbound, _ = receive(conversation, "Qual o prazo de entrega?")
    drain = start_drain("--no-listen", "--poll-interval", "5", *RESPONDER, **ai_env(fake))
    processes.append(drain)
    wait_for(lambda: fake.answered(CHAT) >= 1, timeout=120, what=drain.output)
    drain.send_signal(signal.SIGKILL)
    drain.wait(timeout=10)

    # The lease of the killed worker runs out; the delivery is reaped and run again here.
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    settings.AI = {
        "BASE_URL": fake.base_url,
        "API_KEY": "sk-e2e",
        "CHAT_MODEL": "fake-chat",
        "SENTIMENT_BEFORE_REPLY": False,  # as in ai_env
    }
    with time_machine.travel(timezone.now() + dt.timedelta(seconds=31), tick=True):
        claims.reap()
        Worker(
            WorkerOptions(
                consumers=["ai-response-worker"], once=True, listen=False, startup_jitter=0
            )
        ).run()
    delivery = Delivery.objects.get(consumer="ai-response-worker")
    assert delivery.status == "done"
    assert len(ai_replies(inbound)) == 1
    assert len(events("message.queued")) == 1
    assert len(events("ai.responded")) == 1
    assert 1 <= fake.answered(CHAT) <= 2  # a kill before the commit asks the model again


def test_budget_exhaustion_warns_then_throttles_and_skips_the_model(
    conversation: Conversation, fake: OpenAIFake, processes: list[Drain]
) -> None:
    AiAccount.objects.create(
        organization_id=conversation.organization_id,
        daily_budget_cents=130,
        spent_day=timezone.localdate(),
    )
    messages = [receive(conversation, f"pergunta {n}")[0] for n in range(4)]
    drain_once(fake, processes)

    assert [len(ai_replies(m)) for m in messages] == [1, 1, 1, 1]  # 56, 112 (86%), 168 c
    assert len(fake.calls(CHAT)) == 3  # the fourth was never sent to the model: it got the
    assert ai_replies(messages[3])[0].body == AI_FALLBACK  # fallback message and a person
    assert [e.payload["reason"] for e in events("ai.handoff_triggered")] == ["budget_exhausted"]
    (warning,) = events("ai.budget_warning")
    assert warning.payload["daily_budget_cents"] == 130
    assert warning.payload["pct_used"] == pytest.approx(86.2, abs=0.1)
    (throttled,) = events("ai.budget_throttled")
    assert throttled.payload["current_cents"] == 168
    assert "throttle_until" in throttled.payload
    assert Delivery.objects.filter(consumer="ai-response-worker", status="done").count() == 4


def test_a_request_for_a_human_hands_off_and_the_bot_stays_quiet(
    conversation: Conversation, fake: OpenAIFake, processes: list[Drain]
) -> None:
    first, _ = receive(conversation, "Quero falar com um atendente, por favor")
    later, _ = receive(conversation, "Alguém aí?")
    drain_once(fake, processes)

    conversation.refresh_from_db()
    assert conversation.bot_active is False
    (handoff,) = events("ai.handoff_triggered")
    assert handoff.payload == {
        "conversation_id": str(conversation.pk),
        "reason": "human_requested",
        "from": "bot",
    }
    assert ai_replies(first) == [] and ai_replies(later) == []
    assert fake.calls(CHAT) == []
    assert not Message.objects.filter(sender="ai").exists()
