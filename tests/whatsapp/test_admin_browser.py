"""The WhatsApp admin pages in a real browser (headless Chromium) at a laptop's 1280 px: the
sessions list, a conversation with its messages and a message's status timeline, with no
horizontal scroll. Screenshots go to test-artifacts/admin/."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from crm.models import Conversation, Message
from tests.support.browser import Console, log_in
from tests.support.factories import MessageFactory
from whatsapp.models import WahaSession

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-Console-1"


def test_sessions_conversation_and_message_pages_fit_1280_px(
    browser: Any, live_server: Any, session: WahaSession, conversation: Conversation
) -> None:
    inbound = MessageFactory(
        organization=conversation.organization,
        conversation=conversation,
        body="Olá! Meu pedido 12345 ainda não chegou, vocês conseguem verificar o rastreio?",
        external_id="false_5511988887777@c.us_3EB0C767D26A1D2E5B",
    )
    reply = Message.objects.create(
        organization=conversation.organization,
        conversation=conversation,
        direction="outbound",
        status="read",
        sender="agent",
        body="Claro! Já verifiquei: ele sai hoje para entrega.",
        reply_to=inbound,
        external_id="true_5511988887777@c.us_3EB0C767D26A1D2E5C",
        sent_at=timezone.now(),
        delivered_at=timezone.now(),
        read_at=timezone.now(),
    )
    User.objects.create_superuser("ops", "ops@example.com", PASSWORD)
    log_in(browser, live_server.url, "ops", PASSWORD)
    ui = Console(browser, live_server.url)
    browser.set_window_size(1280, 900)
    pages = [
        ("/admin/whatsapp/wahasession/", session.name, "whatsapp-01-sessions"),
        (
            f"/admin/crm/conversation/{conversation.pk}/change/",
            "ele sai hoje para entrega",
            "whatsapp-02-conversation",
        ),
        (f"/admin/crm/message/{reply.pk}/change/", "read", "whatsapp-03-message-timeline"),
    ]
    for path, text, shot in pages:
        ui.open(path)
        ui.wait_for_text(text)
        assert ui.horizontal_overflow() == 0, path
        ui.shot(shot, width=1280)
