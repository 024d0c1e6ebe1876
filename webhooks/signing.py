"""Secrets, delivery ids and signatures in the Standard Webhooks format.

A secret is `whsec_` + base64 of 32 random bytes; the HMAC key is the decoded bytes. A delivery is
signed as `v1,<base64 HMAC-SHA256 of "{webhook-id}.{timestamp}.{body}">`; during a rotation
window the header carries one signature per valid secret, space-separated, so receivers using
the public `standardwebhooks` library verify it unchanged.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import uuid
from collections.abc import Sequence

from core import crypto
from webhooks.conf import SECRETS_CONTEXT

SECRET_PREFIX = "whsec_"  # noqa: S105  (the format's prefix, not a secret)
SECRET_BYTES = 32
# Namespace of the delivery ids: uuid5(namespace, "{event_id}:{subscription_id}").
DELIVERY_NAMESPACE = uuid.UUID("6f2a3c1e-8b4d-5e7f-9a0b-1c2d3e4f5a6b")


def generate_secret() -> str:
    """A fresh signing secret in the Standard Webhooks format."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    """The HMAC key of a `whsec_...` secret."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError("a webhook secret must be 'whsec_' followed by base64") from None


def encrypt_secret(secret: str) -> str:
    return crypto.encrypt(SECRETS_CONTEXT, secret)


def decrypt_secret(token: str) -> str:
    return crypto.decrypt(SECRETS_CONTEXT, token)


def delivery_id(event_id: uuid.UUID, subscription_id: uuid.UUID) -> uuid.UUID:
    """Stable across retries and resends: the receiver's deduplication key."""
    return uuid.uuid5(DELIVERY_NAMESPACE, f"{event_id}:{subscription_id}")


def signature(keys: Sequence[bytes], *, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: one `v1,<base64>` per key, space-separated."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for key in keys
    )
