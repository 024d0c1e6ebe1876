"""The fallback model (seed 000 §5.4) against two fake providers on loopback: a primary failing
with a 5xx or hanging past the timeout is answered by the fallback, in the gateway and for the
responder; prompt caching's tokens are counted and priced."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest
from prometheus_client import REGISTRY

from ai.gateway import ChatMessage, GatewayError, gateway_for
from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery
from tests.support.ai_messages import ai_replies, receive
from tests.support.factories import ConversationFactory
from tests.support.openai_fake import CHAT, EMBEDDINGS, Failure, OpenAIFake, openai_fake

TIMEOUT = 0.5  # the primary's (and the fallback's) timeout here; production: AI_TIMEOUT, 30 s
HANG = 60.0  # a hanging provider: far past the timeout (the fake stops waiting at its shutdown)
HELLO = [ChatMessage("user", "Oi")]


@pytest.fixture
def backup() -> Iterator[OpenAIFake]:
    with openai_fake() as server:
        server.reply_text = "resposta do modelo reserva"
        yield server


@pytest.fixture
def with_fallback(settings: Any, ai_on_fake: OpenAIFake, backup: OpenAIFake) -> OpenAIFake:
    settings.AI = {
        **settings.AI,
        "TIMEOUT": TIMEOUT,
        "FALLBACK_CHAT_MODEL": "backup-chat",
        "SENTIMENT_BEFORE_REPLY": False,  # the reply's call only (test_responder_guards)
        "FALLBACK_BASE_URL": backup.base_url,
        "FALLBACK_API_KEY": "sk-test-backup",  # pragma: allowlist secret
    }
    return ai_on_fake


def fallbacks(error_class: str, outcome: str) -> float:
    labels = {"error_class": error_class, "outcome": outcome}
    return REGISTRY.get_sample_value("deskcomm_ai_fallbacks_total", labels) or 0.0


def chat() -> tuple[str, str, float]:
    started = time.monotonic()
    with closing(gateway_for(None)) as gateway:
        result = gateway.chat(HELLO)
    return result.text, result.model, time.monotonic() - started


def test_a_5xx_from_the_primary_is_answered_by_the_fallback_model(
    with_fallback: OpenAIFake, backup: OpenAIFake
) -> None:
    before = fallbacks("server_error", "answered")
    with_fallback.fail_next(CHAT, Failure(status=503))
    assert chat()[:2] == ("resposta do modelo reserva", "backup-chat")
    (sent,) = backup.calls(CHAT)
    assert sent["model"] == "backup-chat" and sent["_authorization"] == "Bearer sk-test-backup"
    assert fallbacks("server_error", "answered") == before + 1
    # The next call goes to the primary again.
    assert chat()[:2] == ("Eco: Oi", "fake-chat")


def test_a_primary_hanging_past_the_timeout_is_answered_by_the_fallback_within_its_own(
    with_fallback: OpenAIFake, backup: OpenAIFake
) -> None:
    with_fallback.fail_next(CHAT, Failure(hang=HANG))
    text, model, took = chat()
    assert (text, model) == ("resposta do modelo reserva", "backup-chat")
    # The primary's timeout, then the fallback's answer: at least the timeout, and far less than
    # the hang (the fake holds the primary's answer back HANG s; the bound leaves a loaded
    # machine its scheduling delays without accepting a caller that waited the hang out).
    assert TIMEOUT <= took < HANG / 2


def test_both_failing_raises_the_fallbacks_transient_error_for_the_bus_to_retry(
    with_fallback: OpenAIFake, backup: OpenAIFake
) -> None:
    before = fallbacks("server_error", "failed")
    with_fallback.fail_next(CHAT, Failure(status=500))
    backup.fail_next(CHAT, Failure(hang=HANG))
    with pytest.raises(GatewayError) as raised:
        chat()
    assert raised.value.transient and raised.value.error_class == "timeout"
    assert fallbacks("server_error", "failed") == before + 1


def test_no_fallback_for_a_refusal_nor_for_embeddings(
    with_fallback: OpenAIFake, backup: OpenAIFake
) -> None:
    with_fallback.fail_next(CHAT, Failure(status=400))
    with pytest.raises(GatewayError) as raised:
        chat()
    assert raised.value.error_class == "http_400"
    with_fallback.fail_next(EMBEDDINGS, Failure(status=500))
    with pytest.raises(GatewayError), closing(gateway_for(None)) as gateway:
        gateway.embed(["texto"])
    assert backup.calls(CHAT) == [] and backup.calls(EMBEDDINGS) == []


def test_without_a_fallback_model_a_5xx_reaches_the_caller(ai_on_fake: OpenAIFake) -> None:
    ai_on_fake.fail_next(CHAT, Failure(status=502))
    with pytest.raises(GatewayError) as raised:
        chat()
    assert raised.value.error_class == "server_error"


def test_a_fallback_without_its_own_endpoint_is_another_model_of_the_primary(
    settings: Any, ai_on_fake: OpenAIFake
) -> None:
    settings.AI = {**settings.AI, "FALLBACK_CHAT_MODEL": "other-model"}
    ai_on_fake.fail_next(CHAT, Failure(status=500))
    assert chat()[1] == "other-model"
    assert [c["model"] for c in ai_on_fake.calls(CHAT)] == ["fake-chat", "other-model"]


@pytest.mark.django_db(transaction=True)
def test_the_responder_replies_with_the_fallback_when_the_primary_fails(
    org: Organization, with_fallback: OpenAIFake
) -> None:
    conversation = ConversationFactory(organization=org)
    inbound, _ = receive(conversation, "Qual o prazo de entrega?")
    with_fallback.fail_next(CHAT, Failure(status=500))
    Worker(
        WorkerOptions(consumers=["ai-response-worker"], once=True, listen=False, startup_jitter=0)
    ).run()
    (reply,) = ai_replies(inbound)
    assert reply.body == "resposta do modelo reserva"
    assert Delivery.objects.get(consumer="ai-response-worker").status == "done"  # no bus retry


def test_cached_prompt_tokens_are_counted_and_priced_at_the_cache_rate(
    ai_on_fake: OpenAIFake, settings: Any
) -> None:
    settings.AI = {**settings.AI, "PRICE_CACHED_INPUT_CENTS_PER_MTOK": 500_000.0}
    ai_on_fake.cached_tokens = 40  # of the 42 prompt tokens
    labels = {"kind": "chat", "model": "fake-chat"}
    before = REGISTRY.get_sample_value("deskcomm_ai_cached_tokens_total", labels) or 0.0
    with closing(gateway_for(None)) as gateway:
        result = gateway.chat(HELLO)
    assert REGISTRY.get_sample_value("deskcomm_ai_cached_tokens_total", labels) == before + 40
    # 2 uncached at 1 cent, 40 cached at 0.5 cent, 7 out at 2 cents.
    assert result.cost_cents == pytest.approx(2 + 20 + 14)
