"""Stores' access tokens at rest: their own key context (`oauth`), rotated by the project's
key-rotation service like every other context."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from core import crypto
from core.key_rotation import encryption_key_rotate
from core.models import Organization
from nuvemshop.models import OAUTH_CONTEXT, Store

pytestmark = pytest.mark.django_db


def test_the_token_is_encrypted_in_its_own_context_and_rotates(
    settings: Any, org: Organization
) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, OAUTH_CONTEXT: [old]}
    store = Store(organization=org, ns_store_id=1)
    store.access_token = "61181d08b7e328d256736hdcb671c3ce50b8af5"
    store.save()
    assert ("nuvemshop.Store", "access_token_encrypted") in crypto.encrypted_fields(OAUTH_CONTEXT)
    assert "61181d08" not in Store.objects.values_list("access_token_encrypted", flat=True)[0]
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, OAUTH_CONTEXT: [new, old]}
    report = encryption_key_rotate(context=OAUTH_CONTEXT, actor="test")
    assert (report.rewritten, report.remaining) == (1, 0)
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, OAUTH_CONTEXT: [new]}
    assert Store.objects.get().access_token == "61181d08b7e328d256736hdcb671c3ce50b8af5"
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, "cpf": [old]}
    with pytest.raises(crypto.DecryptionError):  # another context's keys cannot read it
        crypto.decrypt("cpf", Store.objects.get().access_token_encrypted)
