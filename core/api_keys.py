"""The API key format: `dck_<prefix>_<secret>`, generated, parsed and hashed here only.

- `prefix`: 12 hex characters, public (shown in the admin and logs), unique, the lookup key;
- `secret`: 32 random bytes, URL-safe base64 (256 bits: guessing is hopeless, so a fast hash is
  safe and a per-request check stays cheap);
- stored: the hex SHA-256 of the whole key, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

KEY_MARKER = "dck"
_KEY_SHAPE = re.compile(r"dck_([0-9a-f]{12})_([A-Za-z0-9_-]{43})")


@dataclass(frozen=True)
class IssuedKey:
    """A freshly generated key: `full` is shown once and never stored."""

    prefix: str
    full: str

    @property
    def secret_hash(self) -> str:
        return hash_key(self.full)


def generate() -> IssuedKey:
    prefix = secrets.token_hex(6)
    return IssuedKey(prefix=prefix, full=f"{KEY_MARKER}_{prefix}_{secrets.token_urlsafe(32)}")


def prefix_of(token: str) -> str | None:
    """The prefix of a well-formed key, else None (nothing to look up)."""
    match = _KEY_SHAPE.fullmatch(token)
    return match.group(1) if match else None


def hash_key(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def matches(token: str, secret_hash: str) -> bool:
    """Constant-time comparison of a presented key with a stored hash."""
    return hmac.compare_digest(hash_key(token), secret_hash)
