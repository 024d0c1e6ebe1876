"""Encryption contexts: per-context keys from settings, rotation, and refusal without a key."""

from __future__ import annotations

import logging

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.test.utils import override_settings

from core import crypto
from core.checks import check_encryption_keys

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
PROD = {"DEBUG": False, "SECRET_KEY": "a-real-production-secret-key-0123456789"}


def test_round_trip_and_rotation_keep_old_tokens_readable() -> None:
    with override_settings(ENCRYPTION_KEYS={"ctx": [OLD]}):
        token = crypto.encrypt("ctx", "whsec_abc")
        assert token != "whsec_abc" and "whsec" not in token
    with override_settings(ENCRYPTION_KEYS={"ctx": [NEW, OLD]}):
        assert crypto.decrypt("ctx", token) == "whsec_abc"
        rotated = crypto.reencrypt("ctx", token)
    with override_settings(ENCRYPTION_KEYS={"ctx": [NEW]}):
        assert crypto.decrypt("ctx", rotated) == "whsec_abc"
        with pytest.raises(crypto.DecryptionError, match="cannot decrypt a ctx value"):
            crypto.decrypt("ctx", token)


def test_contexts_have_their_own_keys() -> None:
    with (
        override_settings(ENCRYPTION_KEYS={"a": [OLD], "b": [NEW]}),
        pytest.raises(crypto.DecryptionError),
    ):
        crypto.decrypt("b", crypto.encrypt("a", "x"))


def test_production_without_a_key_refuses(caplog: pytest.LogCaptureFixture) -> None:
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": []}, **PROD):
        with pytest.raises(ImproperlyConfigured, match="ENCRYPTION_KEYS_WEBHOOKS"):
            crypto.encrypt("webhook_secrets", "x")
        assert [e.id for e in check_encryption_keys()] == ["deskcomm.E002"]


def test_a_malformed_key_is_reported() -> None:
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": ["not-a-key"]}, **PROD):
        assert [e.id for e in check_encryption_keys()] == ["deskcomm.E003"]
        with pytest.raises(ImproperlyConfigured, match="not a Fernet key"):
            crypto.encrypt("webhook_secrets", "x")


def test_development_uses_a_derived_key_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    crypto._warned.discard("dev_ctx")
    with override_settings(ENCRYPTION_KEYS={"dev_ctx": []}, DEBUG=True):
        with caplog.at_level(logging.WARNING, logger="core.crypto"):
            token = crypto.encrypt("dev_ctx", "x")
        assert crypto.decrypt("dev_ctx", token) == "x"
        assert check_encryption_keys() == []
    assert "DEVELOPMENT ONLY" in caplog.text


@pytest.mark.parametrize(
    "key",
    [
        Fernet.generate_key().decode(),
        Fernet.generate_key().decode().rstrip("="),  # padding missing
        Fernet.generate_key().decode()[:-4],  # 29 bytes
        "A" * 64,  # 48 bytes
        "not a key!",
        "çãé" * 15,  # not ASCII
        "",
    ],
    # Named: each xdist worker draws its own keys, and every worker must collect the same ids.
    ids=["fresh", "unpadded", "29-bytes", "48-bytes", "not-base64", "not-ascii", "empty"],
)
def test_the_key_format_check_agrees_with_fernet(key: str) -> None:
    try:
        Fernet(key)
        accepted = True
    except ValueError:
        accepted = False
    assert crypto.is_fernet_key(key) is accepted
