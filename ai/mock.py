"""MOCK_AI=true: deterministic fixtures for development (no key, no network).

Chat answers come from templates chosen by the last user message (a greeting, a request for a
human, an angry message, a sentiment classification...). Embeddings are a normalized bag of
hashed words (and word bigrams) of `EMBEDDING_DIMENSIONS` dimensions: texts that share words have
a positive cosine similarity, so retrieval over them is meaningful (lexical, not semantic).
Production refuses MOCK_AI (system check ai.E001).
"""

from __future__ import annotations

import hashlib
import itertools
import math

from ai.calls import ChatMessage, ChatResult, EmbeddingResult, cost_cents
from ai.conf import EMBEDDING_DIMENSIONS
from ai.words import normalized_words

MOCK_CHAT_MODEL = "mock-chat"
MOCK_EMBEDDING_MODEL = "mock-embedding"
NEGATIVE = ("pessimo", "horrivel", "absurdo", "raiva", "irritado", "nunca mais", "lixo", "odeio")
POSITIVE = ("obrigad", "otimo", "adorei", "perfeito", "excelente", "maravilh")


def hash_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A unit vector: each word (and bigram) adds ±1 at a hashed position."""
    vector = [0.0] * dimensions
    words = normalized_words(text)
    features = words + [f"{a}_{b}" for a, b in itertools.pairwise(words)]
    for feature in features:
        digest = hashlib.sha256(feature.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dimensions
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0:
        vector[0] = 1.0  # an empty text still needs a direction (cosine is undefined at 0)
        return vector
    return [v / norm for v in vector]


def mock_sentiment(text: str) -> tuple[str, float]:
    plain = " ".join(normalized_words(text))
    if any(word in plain for word in NEGATIVE):
        return "angry", -0.9
    if any(word in plain for word in POSITIVE):
        return "positive", 0.8
    return "neutral", 0.0


def _reply(messages: list[ChatMessage]) -> str:
    system = messages[0].content if messages and messages[0].role == "system" else ""
    last = next((m.content for m in reversed(messages) if m.role == "user"), "")
    if "classify the sentiment" in system.lower():
        label, score = mock_sentiment(last)
        return f'{{"sentiment": "{label}", "score": {score}}}'
    context = system.split("Contexto:\n", 1)[1].strip() if "Contexto:\n" in system else ""
    first_fact = context.splitlines()[0] if context else ""
    answer = f"[mock] Recebi sua mensagem: {last.strip()[:200]}"
    return f"{answer}\n{first_fact}" if first_fact else answer


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


class MockGateway:
    """The gateway's interface with fixtures; tokens are counted as words, priced as usual."""

    def chat(self, messages: list[ChatMessage], *, model: str | None = None) -> ChatResult:
        text = _reply(messages)
        tokens_in = sum(_tokens(m.content) for m in messages)
        tokens_out = _tokens(text)
        cost = cost_cents(tokens_in, tokens_out)
        return ChatResult(text, MOCK_CHAT_MODEL, tokens_in, tokens_out, cost, 0)

    def close(self) -> None:
        return None

    def embed(self, texts: list[str]) -> EmbeddingResult:
        vectors = [hash_embedding(t) for t in texts]
        tokens = sum(map(_tokens, texts))
        return EmbeddingResult(
            vectors, MOCK_EMBEDDING_MODEL, tokens, cost_cents(tokens, embedding=True), 0
        )
