"""The environment variables that hold the encryption keys: one per context, named
`ENCRYPTION_KEYS_<CONTEXT>`, each a comma-separated list of Fernet keys, newest first (the first
encrypts, every one decrypts: a rotation puts the new key in front).

The names these variables had before (`WEBHOOK_SECRETS_KEY`, `CPF_ENCRYPTION_KEY`, ...) are still
read as deprecated aliases: a process started with one logs a warning naming the old and the new
variable once (core.crypto.warn_deprecated_key_variables, at start-up). Both names set to
different keys is a configuration error at start-up, since which one encrypts would be a guess.

Standard library and Django's exception only: deskcomm/settings.py reads the keys through this.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from django.core.exceptions import ImproperlyConfigured

PREFIX = "ENCRYPTION_KEYS_"

# context (core.crypto) -> its variable
VARIABLES: Mapping[str, str] = {
    # webhook signing secrets (the "secrets" in these names is a context, not a value)
    "webhook_secrets": "ENCRYPTION_KEYS_WEBHOOKS",  # pragma: allowlist secret
    "cpf": "ENCRYPTION_KEYS_CPF",  # contacts' CPF (LGPD)
    "ai_provider": "ENCRYPTION_KEYS_AI_PROVIDERS",  # organizations' own AI API keys
    "oauth": "ENCRYPTION_KEYS_OAUTH",  # Nuvemshop stores' access tokens
    "waha_byo": "ENCRYPTION_KEYS_WAHA",  # WAHA sessions' API keys and webhook HMAC secrets
    # pipelines' secret header values
    "pipeline_secrets": "ENCRYPTION_KEYS_PIPELINES",  # pragma: allowlist secret
}

# context -> the variable's former name, still read (deprecated)
FORMER_NAMES: Mapping[str, str] = {
    "webhook_secrets": "WEBHOOK_SECRETS_KEY",  # pragma: allowlist secret
    "cpf": "CPF_ENCRYPTION_KEY",
    "ai_provider": "AI_PROVIDER_KEYS_KEY",
    "oauth": "ENCRYPTION_KEY_OAUTH",
    "waha_byo": "WAHA_ENCRYPTION_KEY",
    "pipeline_secrets": "PIPELINE_SECRETS_KEY",  # pragma: allowlist secret
}


class ConflictingKeyVariables(ImproperlyConfigured):
    """A context's variable and its deprecated alias are both set, to different keys."""


def variable(context: str) -> str:
    """The environment variable of a context's keys."""
    return VARIABLES.get(context, PREFIX + context.upper())


def read_keys(
    read: Callable[[str], list[str]],
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """({context: keys}, {deprecated name: its replacement} for each deprecated name set), reading
    each variable with `read` (a name -> list of keys, [] when unset or empty)."""
    keys: dict[str, list[str]] = {}
    aliases: dict[str, str] = {}
    for context, name in VARIABLES.items():
        current, former = read(name), read(FORMER_NAMES[context])
        if current and former and current != former:
            raise ConflictingKeyVariables(
                f"{name} and its deprecated alias {FORMER_NAMES[context]} are both set, to "
                f"different keys: keep only {name} (newest key first, then the older ones)"
            )
        if former:
            aliases[FORMER_NAMES[context]] = name
        keys[context] = current or former
    return keys, aliases
