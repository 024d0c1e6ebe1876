"""Fixtures of the AI tests: the fake OpenAI-compatible server and settings pointing at it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.openai_fake import OpenAIFake, openai_fake


@pytest.fixture
def fake_openai() -> Iterator[OpenAIFake]:
    with openai_fake() as server:
        yield server


@pytest.fixture
def ai_on_fake(settings: Any, fake_openai: OpenAIFake) -> OpenAIFake:
    """The gateway talks to the fake (loopback allowed as in development), no mock."""
    settings.OUTBOUND_HTTP_ALLOW_PRIVATE = True
    settings.AI = {
        "MOCK": False,
        "API_KEY": "sk-test-default",
        "BASE_URL": fake_openai.base_url,
        "CHAT_MODEL": "fake-chat",
        "EMBEDDING_MODEL": "fake-embedding",
        "TIMEOUT": 2.0,
        "PRICE_INPUT_CENTS_PER_MTOK": 1_000_000.0,  # 1 cent per input token: easy sums
        "PRICE_OUTPUT_CENTS_PER_MTOK": 2_000_000.0,
        "MAX_INLINE_RETRY_AFTER": 1.0,
    }
    return fake_openai


@pytest.fixture
def ai_mock(settings: Any) -> None:
    settings.AI = {"MOCK": True}
