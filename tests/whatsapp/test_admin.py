"""The WhatsApp admin pages: sessions (keys write-only and encrypted, "test send" against the fake
WAHA), messages with their status timeline, conversations with their messages."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core.models import Organization
from crm.models import Conversation, Message
from crm.services import send_message
from tests.support.waha import FakeWaha
from tests.whatsapp.test_sending import drain_once
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "pw-Admin-waha-1"  # pragma: allowlist secret


@pytest.fixture
def admin_client(db: None) -> Client:
    user = User.objects.create_superuser("root", password=PASSWORD)
    client = Client()
    client.force_login(user)  # (the login form itself: tests/core/test_admin_login.py)
    return client


def test_adding_a_session_stores_its_keys_encrypted_and_never_shows_them(
    admin_client: Client, org: Organization, waha: FakeWaha
) -> None:
    answer = admin_client.post(
        "/admin/whatsapp/wahasession/add/",
        {
            "organization": org.pk,
            "name": "vendas",
            "base_url": waha.url,
            "is_default": "on",
            "api_key": "key-typed-by-the-operator",  # pragma: allowlist secret
            "webhook_secret": "hmac-typed-by-the-operator",  # pragma: allowlist secret
        },
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    session = WahaSession.objects.get(name="vendas")
    assert session.api_key == "key-typed-by-the-operator"  # pragma: allowlist secret
    assert "typed-by" not in session.api_key_encrypted + session.webhook_secret_encrypted
    page = admin_client.get(f"/admin/whatsapp/wahasession/{session.pk}/change/").content.decode()
    assert "typed-by-the-operator" not in page
    assert "/api/webhooks/waha/vendas" in page and "stored (encrypted)" in page
    listing = admin_client.get("/admin/whatsapp/wahasession/").content.decode()
    assert "vendas" in listing and "UNKNOWN" in listing


def test_the_test_send_action_sends_a_text_to_the_sessions_own_number(
    admin_client: Client, session: WahaSession, waha: FakeWaha
) -> None:
    answer = admin_client.post(
        "/admin/whatsapp/wahasession/",
        {"action": "test_send", "_selected_action": [str(session.pk)]},
        follow=True,
    )
    assert "Loja: sent (true_5511900000000@c.us_" in answer.content.decode()
    (call,) = waha.sends()
    assert call.body is not None and call.body["chatId"] == "5511900000000@c.us"
    waha.sessions["loja"] = "SCAN_QR_CODE"
    answer = admin_client.post(
        "/admin/whatsapp/wahasession/",
        {"action": "test_send", "_selected_action": [str(session.pk)]},
        follow=True,
    )
    assert "Loja: session loja is SCAN_QR_CODE, not WORKING" in answer.content.decode()
    assert len(waha.sends()) == 1


def test_a_message_page_shows_its_status_timeline_and_the_conversation_its_messages(
    admin_client: Client, session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    message = send_message(conversation=conversation, body="Pedido a caminho")
    drain_once()
    message.refresh_from_db()
    page = admin_client.get(f"/admin/crm/message/{message.pk}/change/").content.decode()
    assert "Status timeline" in page
    for step in ("created", "sent", "event message.queued", "event message.sent"):
        assert step in page
    assert page.index("event message.queued") < page.index("event message.sent")
    listing = admin_client.get("/admin/crm/message/?status__exact=sent").content.decode()
    assert str(message.pk)[:8] in listing
    page = admin_client.get(f"/admin/crm/conversation/{conversation.pk}/change/").content.decode()
    assert "Pedido a caminho" in page and "open until" in page
    assert Message.objects.count() == 1


def test_the_session_page_shows_the_absolute_webhook_url_to_paste_into_waha(
    admin_client: Client, session: WahaSession, settings: object
) -> None:
    page = admin_client.get(f"/admin/whatsapp/wahasession/{session.pk}/change/").content.decode()
    assert "http://testserver/api/webhooks/waha/loja" in page  # the request's origin
    settings.WHATSAPP = {**settings.WHATSAPP, "PUBLIC_BASE_URL": "https://crm.example.com/"}  # type: ignore[attr-defined]
    page = admin_client.get(f"/admin/whatsapp/wahasession/{session.pk}/change/").content.decode()
    assert "https://crm.example.com/api/webhooks/waha/loja" in page


def test_a_second_default_session_is_a_form_error_not_a_constraint_error(
    admin_client: Client, session: WahaSession, org: Organization
) -> None:
    answer = admin_client.post(
        "/admin/whatsapp/wahasession/add/",
        {"organization": org.pk, "name": "vendas", "base_url": "", "is_default": "on"},
    )
    assert answer.status_code == 200  # the form again, with the error on the field
    page = answer.content.decode()
    assert "already sends through its default session" in page and "&#x27;loja&#x27;" in page
    assert not WahaSession.objects.filter(name="vendas").exists()
    answer = admin_client.post(
        "/admin/whatsapp/wahasession/add/",
        {"organization": org.pk, "name": "vendas", "base_url": ""},
    )
    assert answer.status_code == 302  # a second, non-default session is fine
