"""WhatsApp fixtures: a fake WAHA on loopback, a session of `org` pointing at it, a conversation
whose customer window is open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test.utils import override_settings
from django.utils import timezone

from core.models import Organization
from crm.models import Conversation
from tests.support.factories import ConversationFactory
from tests.support.waha import FakeWaha, fake_waha
from whatsapp.client import close_send_client
from whatsapp.models import WahaSession

API_KEY = "waha-test-key"  # pragma: allowlist secret
HMAC_SECRET = "waha-test-hmac"  # pragma: allowlist secret
SESSION = "loja"

WAHA_TEST_SETTINGS: dict[str, Any] = {
    "ALLOW_PRIVATE_TARGETS": True,  # the fake WAHA is on 127.0.0.1
    "TIMEOUT": 2.0,
    "CONNECT_TIMEOUT": 1.0,
}


def subprocess_settings_env(waha: FakeWaha) -> dict[str, str]:
    """The environment a drain subprocess needs to reach the fake WAHA."""
    return {
        "WAHA_ALLOW_PRIVATE_TARGETS": "true",
        "WAHA_TIMEOUT": "10",
        "EVENTBUS_RETRY_SCHEDULE": "0.2",
        "EVENTBUS_RETRY_JITTER": "0",
    }


@pytest.fixture
def waha_settings() -> Iterator[dict[str, Any]]:
    with override_settings(WHATSAPP=dict(WAHA_TEST_SETTINGS)):
        yield WAHA_TEST_SETTINGS


@pytest.fixture
def waha_engine() -> str:
    """The fake WAHA's engine (docker compose's NOWEB); parametrize `waha_engine` for others."""
    return "NOWEB"


@pytest.fixture
def waha(waha_settings: dict[str, Any], waha_engine: str) -> Iterator[FakeWaha]:
    with fake_waha(api_key=API_KEY, engine=waha_engine) as server:
        server.sessions[SESSION] = "WORKING"
        try:
            yield server
        finally:
            close_send_client()  # its pooled connections were to this server


@pytest.fixture
def session(org: Organization, waha: FakeWaha) -> WahaSession:
    record = WahaSession(organization=org, name=SESSION, base_url=waha.url, status="WORKING")
    record.api_key = API_KEY
    record.webhook_secret = HMAC_SECRET
    record.save()
    return record


@pytest.fixture
def conversation(org: Organization) -> Conversation:
    return ConversationFactory(
        organization=org,
        external_chat_id="5511988887777@c.us",
        last_inbound_at=timezone.now(),
    )
