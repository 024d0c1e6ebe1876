"""The model gateway: one small interface (chat completion, embeddings) in front of the providers.

`OpenAICompatible` speaks the OpenAI API through the official SDK with a configurable base URL (a
hosted gateway, vLLM, Ollama...), on the SSRF-guarded httpx client (`core.http.guarded_client`),
with the SDK's own retries off: every failure is classified here instead (`GatewayError`):
429, 5xx, timeouts and connection errors are transient (`retry_after` from the answer when it
gave one), any other 4xx and a refused destination are permanent. Each call reports its tokens,
cost and latency. Zero retention: nothing here stores a prompt or a reply.

`gateway_for(organization_id)` picks the provider: the deterministic fixtures when MOCK_AI is on
(`ai.mock`), else the OpenAI-compatible endpoint with the organization's own key or AI_API_KEY.
With AI_FALLBACK_CHAT_MODEL set, `WithFallback` wraps it (seed 000 §5.4): a chat call failing
with a 5xx, a timeout (AI_TIMEOUT, 30 s) or no connection is tried once on the fallback model
(on AI_FALLBACK_BASE_URL with AI_FALLBACK_API_KEY; without a base URL, on the primary's
endpoint and key) before the error reaches the
bus's retries. Embeddings never fall back: another model's vectors would not match the index.

Prompt caching: OpenAI caches a prompt's longest repeated prefix by itself (1024 tokens and up);
every prompt starts with the same system instructions (`ai.prompts`). The answer's
`usage.prompt_tokens_details.cached_tokens` is counted (`deskcomm_ai_cached_tokens_total`) and
priced at AI_PRICE_CACHED_INPUT_CENTS_PER_MTOK.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

from ai import metrics
from ai.calls import (
    ChatMessage,
    ChatResult,
    EmbeddingResult,
    Gateway,
    GatewayError,
    cost_cents,
)
from ai.conf import EMBEDDING_DIMENSIONS, ai_settings
from ai.mock import MockGateway

if TYPE_CHECKING:
    import openai


class OpenAICompatible:
    """An OpenAI-compatible HTTP provider (official SDK, no SDK retries, guarded client)."""

    def __init__(self, *, api_key: str, base_url: str, timeout: float | None = None) -> None:
        import openai  # ~26 MB: imported by the first gateway built, not by every process

        from core.http import guarded_client

        seconds = ai_settings.TIMEOUT if timeout is None else timeout
        self.client = openai.OpenAI(
            api_key=api_key or "unset",
            base_url=base_url,
            max_retries=0,
            timeout=seconds,
            http_client=guarded_client(timeout=seconds),
        )

    def chat(self, messages: list[ChatMessage], *, model: str | None = None) -> ChatResult:
        name = model or ai_settings.CHAT_MODEL
        started = time.monotonic()
        with _classified("chat", name):
            response = self.client.chat.completions.create(
                model=name,
                messages=[{"role": m.role, "content": m.content} for m in messages],  # type: ignore[misc]
            )
        latency = _elapsed_ms(started)
        usage = response.usage
        tokens_in = usage.prompt_tokens if usage else 0
        tokens_out = usage.completion_tokens if usage else 0
        details = usage.prompt_tokens_details if usage else None
        cached = (details.cached_tokens or 0) if details else 0
        text = (response.choices[0].message.content or "") if response.choices else ""
        result = ChatResult(
            text,
            response.model or name,
            tokens_in,
            tokens_out,
            cost_cents(tokens_in, tokens_out, cached=cached),
            latency,
        )
        if cached:
            metrics.CACHED_TOKENS.labels("chat", result.model).inc(cached)
        metrics.observe_call(
            "chat",
            result.model,
            latency_ms=latency,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            cost=result.cost_cents,
        )
        return result

    def close(self) -> None:
        """Close the pooled connections (each worker run builds and closes its gateway)."""
        self.client.close()

    def embed(self, texts: list[str]) -> EmbeddingResult:
        name = ai_settings.EMBEDDING_MODEL
        started = time.monotonic()
        with _classified("embedding", name):
            response = self.client.embeddings.create(
                model=name, input=texts, dimensions=EMBEDDING_DIMENSIONS
            )
        latency = _elapsed_ms(started)
        vectors = [item.embedding for item in sorted(response.data, key=lambda d: d.index)]
        tokens = response.usage.prompt_tokens if response.usage else 0
        result = EmbeddingResult(vectors, name, tokens, cost_cents(tokens, embedding=True), latency)
        metrics.observe_call(
            "embedding",
            name,
            latency_ms=latency,
            tokens_in=tokens,
            tokens_out=0,
            cost=result.cost_cents,
        )
        return result


class _classified:
    """Turns the SDK's exceptions into GatewayError (and counts them by class)."""

    def __init__(self, kind: str, model: str) -> None:
        self.kind, self.model = kind, model

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if exc is None:
            return
        import openai

        if not isinstance(exc, openai.OpenAIError):
            return
        error = classify(exc)
        metrics.count_error(self.kind, self.model, error.error_class)
        raise error from exc


def classify(exc: openai.OpenAIError) -> GatewayError:
    """429/5xx/timeouts/connection errors: transient; other 4xx and refused targets: permanent."""
    import openai

    from core.http import BlockedDestination

    if isinstance(exc, openai.APITimeoutError):
        return GatewayError(str(exc), transient=True, error_class="timeout")
    if isinstance(exc, openai.APIConnectionError):
        if isinstance(exc.__cause__, BlockedDestination):
            return GatewayError(str(exc.__cause__), transient=False, error_class="blocked")
        return GatewayError(str(exc), transient=True, error_class="connection")
    if isinstance(exc, openai.APIStatusError):
        return _classify_status(exc)
    return GatewayError(str(exc), transient=False, error_class=type(exc).__name__)


def _classify_status(exc: openai.APIStatusError) -> GatewayError:
    from core.http import retry_after_seconds

    status = exc.status_code
    if status == 429 or status >= 500:
        return GatewayError(
            str(exc),
            transient=True,
            error_class="rate_limited" if status == 429 else "server_error",
            retry_after=retry_after_seconds(exc.response.headers.get("retry-after")),
        )
    return GatewayError(str(exc), transient=False, error_class=f"http_{status}")


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


FALLBACK_ON = frozenset({"server_error", "timeout", "connection"})


class WithFallback:
    """The primary gateway, with chat calls failing on a 5xx, a timeout or no connection tried
    once on the fallback model (which has the same timeout)."""

    def __init__(self, primary: Gateway, fallback: Gateway, model: str) -> None:
        self.primary, self.fallback, self.model = primary, fallback, model

    def chat(self, messages: list[ChatMessage], *, model: str | None = None) -> ChatResult:
        try:
            return self.primary.chat(messages, model=model)
        except GatewayError as exc:
            if exc.error_class not in FALLBACK_ON:
                raise
            reason = exc.error_class
        try:
            result = self.fallback.chat(messages, model=self.model)
        except GatewayError:
            metrics.FALLBACKS.labels(reason, "failed").inc()
            raise
        metrics.FALLBACKS.labels(reason, "answered").inc()
        return result

    def embed(self, texts: list[str]) -> EmbeddingResult:
        return self.primary.embed(texts)

    def close(self) -> None:
        self.primary.close()
        if self.fallback is not self.primary:
            self.fallback.close()


def gateway_for(organization_id: uuid.UUID | str | None) -> Gateway:
    """The provider for an organization: the mock (MOCK_AI), else the OpenAI-compatible one,
    wrapped with the fallback model when AI_FALLBACK_CHAT_MODEL is set."""
    if ai_settings.MOCK:
        return MockGateway()
    key = _api_key(organization_id)
    primary = OpenAICompatible(api_key=key, base_url=ai_settings.BASE_URL)
    if not ai_settings.FALLBACK_CHAT_MODEL:
        return primary
    if ai_settings.FALLBACK_BASE_URL:
        # Another provider: its own key only, never the organization's key for the primary.
        fallback: Gateway = OpenAICompatible(
            api_key=ai_settings.FALLBACK_API_KEY, base_url=ai_settings.FALLBACK_BASE_URL
        )
    else:
        fallback = primary
    return WithFallback(primary, fallback, ai_settings.FALLBACK_CHAT_MODEL)


def _api_key(organization_id: uuid.UUID | str | None) -> str:
    from ai.models import AiAccount

    if organization_id is not None:
        account = AiAccount.objects.filter(organization_id=organization_id).first()
        if account is not None and account.api_key_encrypted:
            return account.api_key
    return ai_settings.API_KEY
