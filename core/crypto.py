"""Encryption at rest per context: each context ("webhook_secrets", "cpf", later OAuth tokens...)
has its own list of keys from the environment (settings.ENCRYPTION_KEYS).

The first key of a context encrypts; every key decrypts (Fernet/MultiFernet), so a key rotation
adds the new key in front, re-encrypts with `reencrypt`, then drops the old key. Keys are read at
call time. Without a configured key, only a development setup (DEBUG, or the insecure development
SECRET_KEY that production refuses) gets a key derived from SECRET_KEY, with a warning in the log.
"""

from __future__ import annotations

import base64
import hashlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.crypto import salted_hmac

from core import key_variables

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

# cryptography (~7 MB with its Rust bindings) is imported by the first encrypt, decrypt or key
# check, not here: every process imports this module (the models' apps declare their fields).

logger = logging.getLogger(__name__)

_warned: set[str] = set()

# Which model fields hold each context's tokens: {context: [(app_label.Model, field), ...]}.
# Apps declare theirs in AppConfig.ready; `rotate_encryption_key` re-encrypts them.
_encrypted_fields: dict[str, list[tuple[str, str]]] = {}


class DecryptionError(Exception):
    """A token that no configured key of its context can decrypt (wrong key, tampered data)."""


def encrypt(context: str, plaintext: str) -> str:
    """Encrypt text with the context's current key; returns a URL-safe token."""
    return _fernet(context).encrypt(plaintext.encode()).decode()


def decrypt(context: str, token: str) -> str:
    """Decrypt a token made by `encrypt` with any key of the context."""
    from cryptography.fernet import MultiFernet

    return _open(context, token, MultiFernet.decrypt)


def reencrypt(context: str, token: str) -> str:
    """Re-encrypt a token under the context's current key (key rotation)."""
    from cryptography.fernet import MultiFernet

    return _open(context, token, MultiFernet.rotate)


def _open(context: str, token: str, operation: Callable[[MultiFernet, bytes], bytes]) -> str:
    from cryptography.fernet import InvalidToken

    try:
        return operation(_fernet(context), token.encode()).decode()
    except InvalidToken:
        raise DecryptionError(
            f"cannot decrypt a {context} value with the configured keys"
        ) from None


def register_encrypted_field(context: str, model: str, field: str) -> None:
    """Declare that `model.field` ("app_label.Model") holds tokens of `context` (idempotent)."""
    fields = _encrypted_fields.setdefault(context, [])
    if (model, field) not in fields:
        fields.append((model, field))


def encrypted_fields(context: str) -> list[tuple[str, str]]:
    """The (model, field) pairs declared for a context."""
    return list(_encrypted_fields.get(context, []))


def rotatable_contexts() -> list[str]:
    """Contexts with declared fields: what `rotate_encryption_key` can re-encrypt."""
    return sorted(context for context, fields in _encrypted_fields.items() if fields)


def known_contexts() -> list[str]:
    """Contexts with keys in settings or with declared fields."""
    return sorted({*getattr(settings, "ENCRYPTION_KEYS", {}), *_encrypted_fields})


def is_current(context: str, token: str) -> bool:
    """True when the context's current (first) key reads the token: nothing to rotate."""
    from cryptography.fernet import Fernet, InvalidToken

    keys = configured_keys(context)
    if not keys:
        return False
    try:
        Fernet(keys[0]).decrypt(token.encode())
    except InvalidToken:
        return False
    return True


def configured_keys(context: str) -> list[str]:
    """The keys configured for a context, current first (empty when none is set)."""
    keys = getattr(settings, "ENCRYPTION_KEYS", {}).get(context) or []
    return [k for k in keys if k]


def key_problem(context: str) -> str | None:
    """Why the context's configured keys are unusable (None when they are fine or unset)."""
    for key in configured_keys(context):
        if not is_fernet_key(key):
            return f"a {context} key is not a Fernet key (32 url-safe base64-encoded bytes)"
    return None


def is_fernet_key(key: str) -> bool:
    """What `Fernet(key)` accepts: 32 bytes, url-safe base64-encoded (the Fernet spec). Judged
    here, without cryptography, because the system checks of every process (the workers') ask."""
    try:
        return len(base64.urlsafe_b64decode(key)) == 32
    except ValueError:  # binascii.Error (bad padding or alphabet), or a non-ASCII string
        return False


def blind_index(context: str, value: str) -> str:
    """A keyed digest of `value` (HMAC-SHA256 under a key derived from SECRET_KEY and the
    context) for exact-match lookups of data stored encrypted, whose ciphertext differs on every
    write; "" for "". The digest is as personal as the value: redact it with it. Rotating
    SECRET_KEY changes every digest (re-save the values to recompute them)."""
    if not value:
        return ""
    return salted_hmac(f"deskcomm.blind_index.{context}", value, algorithm="sha256").hexdigest()


def missing_key_message(context: str) -> str:
    """What to do when a context has no key: names the exact variable to set."""
    return (
        f"no encryption key is configured for {context}: set {key_variables.variable(context)} "
        "(comma-separated Fernet keys, newest first; see .env.example)"
    )


def warn_deprecated_key_variables() -> None:
    """Log, once per process (at start-up: core's AppConfig.ready), each deprecated key variable
    this process was given, with the name to use instead."""
    for former, current in getattr(settings, "ENCRYPTION_KEY_ALIASES", {}).items():
        if former not in _warned:
            _warned.add(former)
            logger.warning(
                "%s is deprecated: rename it to %s (the old name is still read for now)",
                former,
                current,
            )


def dev_keys_allowed() -> bool:
    """Development only: DEBUG, or the insecure development SECRET_KEY (refused in production)."""
    return bool(settings.DEBUG) or settings.SECRET_KEY == settings.INSECURE_DEV_SECRET_KEY


def _fernet(context: str) -> MultiFernet:
    from cryptography.fernet import Fernet, MultiFernet

    keys = configured_keys(context)
    if keys:
        problem = key_problem(context)
        if problem:
            raise ImproperlyConfigured(problem)
        return MultiFernet([Fernet(k) for k in keys])
    if not dev_keys_allowed():
        raise ImproperlyConfigured(missing_key_message(context))
    return MultiFernet([Fernet(_dev_key(context))])


def _dev_key(context: str) -> bytes:
    if context not in _warned:
        _warned.add(context)
        logger.warning(
            "DEVELOPMENT ONLY: no key configured for %s; using a key derived from SECRET_KEY. "
            "Configure a real key before storing anything that matters.",
            context,
        )
    digest = hashlib.sha256(f"deskcomm-dev-key:{context}:{settings.SECRET_KEY}".encode()).digest()
    return base64.urlsafe_b64encode(digest)
