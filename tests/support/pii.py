"""Hostile personal-data and secret samples that must never leave in logs or Sentry events."""

from __future__ import annotations

PII_SAMPLES = (
    "123.456.789-09",  # CPF, formatted
    "12345678909",  # CPF, bare digits
    "+55 (11) 91234-5678",  # mobile with country code
    "(21) 3456-7890",  # landline
    "5511912345678",  # E.164 without the plus
    "maria.silva@example.com.br",
    "Bearer abcDEF123.456-xyz",
    "sk_live_9f8e7d6c5b4a3210",
    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
)

# Values that only key-based redaction can catch (they look like nothing in particular).
KEYED_SECRETS = {
    "password": "hunter2-hunter2",
    "Authorization": "Token plainvalue42",
    "X-Api-Key": "opaque-key-value-777",
    "refresh_token": "rt-opaque-888",
    "cpf": "cpf-only-by-key-31",
}


def leaked(text: str) -> list[str]:
    """The samples (and keyed secret values) still present in `text`."""
    return [s for s in (*PII_SAMPLES, *KEYED_SECRETS.values()) if s in text]
