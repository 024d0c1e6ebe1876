"""What a model call takes and returns, and what it costs: the gateway's interface (`Gateway`),
its messages and results, its error, and the price of a call. The providers (`ai.gateway`) and
the development fixtures (`ai.mock`) both implement it; neither imports the other's module for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ai.conf import ai_settings


@dataclass(frozen=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True)
class ChatResult:
    text: str
    model: str
    tokens_in: int
    tokens_out: int
    cost_cents: float
    latency_ms: int


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: list[list[float]]
    model: str
    tokens: int
    cost_cents: float
    latency_ms: int


class GatewayError(Exception):
    """A failed model call. `transient`: worth retrying (after `retry_after` s when known)."""

    def __init__(
        self, message: str, *, transient: bool, error_class: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.transient = transient
        self.error_class = error_class
        self.retry_after = retry_after


class Gateway(Protocol):
    """What the workers call."""

    def chat(self, messages: list[ChatMessage], *, model: str | None = None) -> ChatResult: ...

    def embed(self, texts: list[str]) -> EmbeddingResult: ...

    def close(self) -> None: ...


def cost_cents(
    tokens_in: int, tokens_out: int = 0, *, embedding: bool = False, cached: int = 0
) -> float:
    """The price of one call, in cents (AI_PRICE_*_CENTS_PER_MTOK); `cached` of the input
    tokens came from the provider's prompt cache."""
    if embedding:
        return tokens_in * ai_settings.PRICE_EMBEDDING_CENTS_PER_MTOK / 1_000_000
    return (
        (tokens_in - cached) * ai_settings.PRICE_INPUT_CENTS_PER_MTOK
        + cached * ai_settings.PRICE_CACHED_INPUT_CENTS_PER_MTOK
        + tokens_out * ai_settings.PRICE_OUTPUT_CENTS_PER_MTOK
    ) / 1_000_000
