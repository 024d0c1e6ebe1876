"""WahaSession: keys encrypted in their own context (`waha_byo`), rotated like every context,
environment defaults for the fields a session leaves empty."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from core import crypto
from core.key_rotation import encryption_key_rotate
from core.models import Organization
from whatsapp.conf import API_KEY_CONTEXT
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db


def test_the_keys_rotate_to_a_new_key_of_the_waha_byo_context(
    org: Organization, settings: object
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, API_KEY_CONTEXT: [old]}  # type: ignore[attr-defined]
    session = WahaSession(organization=org, name="rotate-me")
    session.api_key = "the-api-key"  # pragma: allowlist secret
    session.webhook_secret = "the-hmac-key"  # pragma: allowlist secret
    session.save()
    assert ("whatsapp.WahaSession", "api_key_encrypted") in crypto.encrypted_fields(API_KEY_CONTEXT)

    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, API_KEY_CONTEXT: [new, old]}  # type: ignore[attr-defined]
    report = encryption_key_rotate(context=API_KEY_CONTEXT, actor="test")
    assert (report.rewritten, report.remaining) == (2, 0)

    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, API_KEY_CONTEXT: [new]}  # type: ignore[attr-defined]
    session.refresh_from_db()
    assert (session.api_key, session.webhook_secret) == ("the-api-key", "the-hmac-key")


def test_empty_fields_fall_back_to_the_environment(org: Organization, settings: object) -> None:
    settings.WHATSAPP = {  # type: ignore[attr-defined]
        "BASE_URL": "http://waha:3000/",
        "API_KEY": "env-key",  # pragma: allowlist secret
        "WEBHOOK_SECRET": "env-hmac",  # pragma: allowlist secret
    }
    session = WahaSession.objects.create(organization=org, name="defaults")
    assert session.effective_base_url == "http://waha:3000"
    assert (session.api_key, session.webhook_secret) == ("env-key", "env-hmac")
    session.api_key = "own-key"  # pragma: allowlist secret
    assert session.api_key == "own-key"  # pragma: allowlist secret
