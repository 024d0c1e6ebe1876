"""The model gateway against a real fake OpenAI-compatible server on loopback: answers, usage and
cost, the failure classification (429/5xx/timeouts transient, other 4xx permanent), no SDK
retries, the SSRF guard, and the per-organization key."""

from __future__ import annotations

import time
from contextlib import closing
from typing import Any

import pytest

from ai.gateway import (
    ChatMessage,
    ChatResult,
    EmbeddingResult,
    GatewayError,
    OpenAICompatible,
    gateway_for,
)
from ai.mock import MockGateway
from ai.models import AiAccount
from core.models import Organization
from tests.support.openai_fake import CHAT, EMBEDDINGS, Failure, OpenAIFake


def chat(messages: list[ChatMessage], organization_id: object = None) -> ChatResult:
    with closing(gateway_for(organization_id)) as gateway:  # type: ignore[arg-type]
        return gateway.chat(messages)


def embed(texts: list[str]) -> EmbeddingResult:
    with closing(gateway_for(None)) as gateway:
        return gateway.embed(texts)


HELLO = [ChatMessage("system", "seja breve"), ChatMessage("user", "Oi, tudo bem?")]


def test_chat_returns_the_text_tokens_cost_and_latency(ai_on_fake: OpenAIFake) -> None:
    ai_on_fake.reply_text = "Olá! Como posso ajudar?"
    result = chat(HELLO)
    assert result.text == "Olá! Como posso ajudar?"
    assert (result.tokens_in, result.tokens_out) == (42, 7)
    assert result.cost_cents == pytest.approx(42 * 1 + 7 * 2)
    assert result.model == "fake-chat" and result.latency_ms >= 0
    (sent,) = ai_on_fake.calls(CHAT)
    assert sent["model"] == "fake-chat"
    assert sent["messages"][-1] == {"role": "user", "content": "Oi, tudo bem?"}
    assert sent["_authorization"] == "Bearer sk-test-default"


def test_embeddings_come_back_in_order_with_the_requested_dimension(
    ai_on_fake: OpenAIFake,
) -> None:
    result = embed(["um", "dois três"])
    assert len(result.vectors) == 2 and {len(v) for v in result.vectors} == {384}
    assert result.tokens == 3
    assert ai_on_fake.calls(EMBEDDINGS)[0]["dimensions"] == 384


@pytest.mark.parametrize(
    ("failure", "error_class", "retry_after"),
    [
        (Failure(429, retry_after="7"), "rate_limited", 7.0),
        (Failure(429), "rate_limited", None),
        (Failure(500), "server_error", None),
        (Failure(503, retry_after="2"), "server_error", 2.0),
    ],
)
def test_rate_limits_and_server_errors_are_transient_and_not_retried_by_the_sdk(
    ai_on_fake: OpenAIFake, failure: Failure, error_class: str, retry_after: float | None
) -> None:
    ai_on_fake.fail_next(CHAT, failure)
    with pytest.raises(GatewayError) as raised:
        chat(HELLO)
    assert raised.value.transient is True
    assert raised.value.error_class == error_class
    assert raised.value.retry_after == retry_after
    assert len(ai_on_fake.calls(CHAT)) == 1  # max_retries=0: the bus owns retries


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_client_errors_are_permanent(ai_on_fake: OpenAIFake, status: int) -> None:
    ai_on_fake.fail_next(CHAT, Failure(status))
    with pytest.raises(GatewayError) as raised:
        chat(HELLO)
    assert raised.value.transient is False
    assert raised.value.error_class == f"http_{status}"


def test_a_timeout_is_transient_and_bounded_by_the_setting(
    ai_on_fake: OpenAIFake, settings: Any
) -> None:
    settings.AI = {**settings.AI, "TIMEOUT": 0.5}
    ai_on_fake.fail_next(EMBEDDINGS, Failure(hang=30))
    started = time.monotonic()
    with pytest.raises(GatewayError) as raised:
        embed(["x"])
    assert raised.value.transient is True and raised.value.error_class == "timeout"
    assert time.monotonic() - started < 10


def test_a_connection_refused_is_transient(settings: Any) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    gateway = OpenAICompatible(api_key="k", base_url="http://127.0.0.1:9/v1", timeout=2)
    with closing(gateway), pytest.raises(GatewayError) as raised:
        gateway.chat(HELLO)
    assert raised.value.transient is True and raised.value.error_class == "connection"


def test_the_ssrf_guard_refuses_a_loopback_base_url_outside_development(
    ai_on_fake: OpenAIFake, settings: Any
) -> None:
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = False
    with pytest.raises(GatewayError) as raised:
        chat(HELLO)
    assert raised.value.transient is False and raised.value.error_class == "blocked"
    assert "OUTBOUND_HTTP_ALLOW_PRIVATE" in str(raised.value)
    assert ai_on_fake.calls(CHAT) == []  # nothing was sent


@pytest.mark.django_db
def test_an_organization_s_own_key_is_stored_encrypted_and_used(
    ai_on_fake: OpenAIFake, org: Organization
) -> None:
    account = AiAccount(organization=org, daily_budget_cents=100, spent_day="2026-12-01")
    account.api_key = "sk-org-own-key"
    account.save()
    assert "sk-org-own-key" not in AiAccount.objects.get(pk=org.pk).api_key_encrypted
    chat(HELLO, org.pk)
    assert ai_on_fake.calls(CHAT)[0]["_authorization"] == "Bearer sk-org-own-key"


def test_mock_ai_answers_without_any_server(ai_mock: None) -> None:
    gateway = gateway_for(None)
    assert isinstance(gateway, MockGateway)
    assert chat(HELLO).text == gateway.chat(HELLO).text
    first, second = gateway.chat(HELLO), gateway.chat(HELLO)
    assert first == second and "Oi, tudo bem?" in first.text
    assert first.tokens_in > 0 and first.tokens_out > 0


def test_every_call_is_counted_in_the_metrics(ai_on_fake: OpenAIFake) -> None:
    from prometheus_client import REGISTRY

    def sample(name: str, **labels: str) -> float:
        value = REGISTRY.get_sample_value(name, labels)
        return value or 0.0

    calls = sample("deskcomm_ai_call_duration_seconds_count", kind="chat", model="fake-chat")
    tokens = sample("deskcomm_ai_tokens_total", kind="chat", model="fake-chat", direction="in")
    errors = sample(
        "deskcomm_ai_errors_total", kind="chat", model="fake-chat", error_class="rate_limited"
    )
    chat(HELLO)
    ai_on_fake.fail_next(CHAT, Failure(429))
    with pytest.raises(GatewayError):
        chat(HELLO)
    assert sample("deskcomm_ai_call_duration_seconds_count", kind="chat", model="fake-chat") == (
        calls + 1
    )
    assert (
        sample("deskcomm_ai_tokens_total", kind="chat", model="fake-chat", direction="in")
        == tokens + 42
    )
    assert (
        sample(
            "deskcomm_ai_errors_total", kind="chat", model="fake-chat", error_class="rate_limited"
        )
        == errors + 1
    )
