"""The AI knobs, read from `settings.AI` at call time (env names: deskcomm/settings.py)."""

from __future__ import annotations

from core.conf import AppSettings

# core.crypto context of the organizations' own model-provider API keys.
PROVIDER_KEY_CONTEXT = "ai_provider"
# The embedding dimension of the chunk table (fixed by its migration; the gateway asks for it).
EMBEDDING_DIMENSIONS = 384
DEFAULT_BUDGET_FALLBACK_MESSAGE = (
    "Recebemos sua mensagem! Um atendente vai continuar a conversa com você em breve."
)


class AiSettings(AppSettings, namespace="AI"):
    """Each `settings.AI` knob with its type and default."""

    # Deterministic fixtures instead of a provider (development only; production refuses it).
    MOCK: bool = False
    API_KEY: str = ""
    BASE_URL: str = "https://api.openai.com/v1"
    CHAT_MODEL: str = "gpt-4o-mini"
    SENTIMENT_MODEL: str = ""  # empty: CHAT_MODEL
    EMBEDDING_MODEL: str = "text-embedding-3-small"
    TIMEOUT: float = 30.0
    # The fallback (seed 000 §5.4): a chat call failing with a 5xx, a timeout (TIMEOUT) or no
    # connection is tried once on this model before the bus retries. Empty FALLBACK_CHAT_MODEL:
    # no fallback. Empty base URL: the primary's endpoint and key (a second model of the same
    # provider); with a base URL, FALLBACK_API_KEY only (an organization's key stays with it).
    FALLBACK_CHAT_MODEL: str = ""
    FALLBACK_BASE_URL: str = ""
    FALLBACK_API_KEY: str = ""
    # Prices, in cents per million tokens, for the cost accounting of every call.
    PRICE_INPUT_CENTS_PER_MTOK: float = 15.0
    PRICE_OUTPUT_CENTS_PER_MTOK: float = 60.0
    PRICE_EMBEDDING_CENTS_PER_MTOK: float = 2.0
    # Input tokens the provider served from its prompt cache (OpenAI: half the input price).
    PRICE_CACHED_INPUT_CENTS_PER_MTOK: float = 7.5
    # A new organization's daily budget; `ai.budget_warning` at this share of it.
    DAILY_BUDGET_CENTS: int = 500
    BUDGET_WARNING_PCT: float = 80.0
    BUDGET_TIME_ZONE: str = "America/Sao_Paulo"
    # A 429's Retry-After up to this many seconds is waited for once, in the handler; longer ones
    # go back to the bus's retry table.
    MAX_INLINE_RETRY_AFTER: float = 5.0
    # Failed responder attempts on one inbound message before the conversation goes to a human.
    HANDOFF_AFTER_FAILURES: int = 3
    # The responder classifies a message the sentiment worker has not classified yet before it
    # answers (an angry message is handed off, not answered).
    SENTIMENT_BEFORE_REPLY: bool = True
    # Sent (once per message) to a contact who writes while the organization's daily budget is
    # exhausted, before the conversation is handed to a person; empty: hand off only.
    BUDGET_FALLBACK_MESSAGE: str = DEFAULT_BUDGET_FALLBACK_MESSAGE
    # health-check-integrations' provider pings: an alert after this many failures in a row;
    # their rows are kept this many days.
    PROVIDER_ALERT_AFTER_FAILURES: int = 2
    PROVIDER_HEALTH_DAYS: float = 7.0
    HISTORY_MESSAGES: int = 10
    RAG_TOP_K: int = 4
    # pgvector's hnsw.ef_search for retrieval (pgvector's default is 40). A tenant's catalogue is
    # small (thousands of chunks), so recall comes first: bench/rag.py measured recall@10 0.31
    # at 40 and 1.00 at 200 on 20k lexical-hash chunks. Lower it for very large tenants.
    RAG_EF_SEARCH: int = 200
    MEDIA_RETENTION_DAYS: int = 365


ai_settings = AiSettings()
