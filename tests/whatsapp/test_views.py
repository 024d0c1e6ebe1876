"""`POST /api/webhooks/waha/<session>` over real HTTP (pytest-django's live server on loopback),
with webhooks signed as WAHA signs them; STOP blocks the contact and the next send."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from django.test import Client

from crm.models import Contact, Conversation, Message
from crm.services import send_message
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import EventLog
from tests.support.db import as_web_process
from tests.support.waha import FakeWaha, inbound_message, signed_webhook
from tests.whatsapp.conftest import HMAC_SECRET
from whatsapp.conf import SEND_CONSUMER
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)

CHAT = "5511977776666@c.us"


def post(
    base: str, session: str, body: bytes, headers: dict[str, str]
) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        f"{base}/api/webhooks/waha/{session}", data=body, method="POST", headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def deliver(base: str, event: str, payload: dict[str, object]) -> tuple[int, dict[str, object]]:
    body, headers = signed_webhook("loja", event, payload, secret=HMAC_SECRET)
    return post(base, "loja", body, headers)


def counts() -> tuple[int, int, int, int]:
    return (
        Contact.objects.count(),
        Conversation.objects.count(),
        Message.objects.count(),
        EventLog.objects.exclude(event_type__startswith="cron.").count(),
    )


def test_a_signed_message_webhook_creates_contact_conversation_and_message(
    live_server: object, session: WahaSession
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    payload = inbound_message(CHAT, "Oi, quero saber do meu pedido", name="Maria Souza")
    body, headers = signed_webhook("loja", "message", payload, secret=HMAC_SECRET)
    assert post(base, "loja", body, headers) == (200, {"result": "stored"})

    message = Message.objects.get()
    conversation = message.conversation
    contact = conversation.contact
    assert (contact.phone, contact.name) == ("+5511977776666", "Maria Souza")
    assert conversation.external_chat_id == CHAT and conversation.last_inbound_at is not None
    assert (message.direction, message.status, message.body, message.external_id) == (
        "inbound",
        "received",
        "Oi, quero saber do meu pedido",
        payload["id"],
    )
    received = EventLog.objects.get(event_type="message.received")
    assert received.payload == {
        "message_id": str(message.pk),
        "conversation_id": str(conversation.pk),
        "contact_id": str(contact.pk),
        "direction": "inbound",
        "channel": "whatsapp",
        "waha_message_id": payload["id"],
    }
    assert received.metadata["schema_version"] == 2
    opened = EventLog.objects.get(event_type="conversation.opened")
    assert opened.payload["conversation_id"] == str(conversation.pk)

    # WAHA redelivers the same webhook: nothing new is written.
    before = counts()
    assert post(base, "loja", body, headers) == (200, {"result": "duplicate"})
    assert counts() == before

    # A second message of the same chat reuses the contact and the conversation.
    assert deliver(base, "message", inbound_message(CHAT, "Alô?"))[1] == {"result": "stored"}
    assert (Contact.objects.count(), Conversation.objects.count(), Message.objects.count()) == (
        1,
        1,
        2,
    )
    assert EventLog.objects.filter(event_type="conversation.opened").count() == 1


@pytest.mark.parametrize(
    "tamper",
    ["missing", "wrong-secret", "body-changed", "wrong-algorithm"],
)
def test_a_bad_or_missing_signature_is_401_and_writes_nothing(
    live_server: object, session: WahaSession, tamper: str
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    body, headers = signed_webhook(
        "loja",
        "message",
        inbound_message(CHAT, "Oi"),
        secret="not-the-secret" if tamper == "wrong-secret" else HMAC_SECRET,
    )
    if tamper == "missing":
        del headers["X-Webhook-Hmac"]
    if tamper == "body-changed":
        body = body.replace(b"Oi", b"Ol")
    if tamper == "wrong-algorithm":
        headers["X-Webhook-Hmac-Algorithm"] = "md5"
    before = counts()
    status, answer = post(base, "loja", body, headers)
    assert status == 401 and "signature" in str(answer["error"])
    assert counts() == before == (0, 0, 0, 0)


def test_an_unknown_session_gets_the_same_answer_as_a_bad_signature(
    live_server: object, session: WahaSession
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    body, headers = signed_webhook(
        "other", "message", inbound_message(CHAT, "Oi"), secret=HMAC_SECRET
    )
    unknown = post(base, "other", body, headers)
    body, headers = signed_webhook("loja", "message", inbound_message(CHAT, "Oi"), secret="bad")
    assert unknown == post(base, "loja", body, headers)
    assert unknown[0] == 401
    assert counts() == (0, 0, 0, 0)


@pytest.mark.parametrize("age_seconds", [-3600, -301, 301, 86400], ids=str)
def test_a_webhook_outside_the_timestamp_window_is_refused(
    client: Client, session: WahaSession, age_seconds: int
) -> None:
    """A captured webhook replayed later (or one dated ahead) is refused: 400, nothing written."""
    now_ms = int(time.time() * 1000)
    body, headers = signed_webhook(
        "loja",
        "session.status",
        {"status": "FAILED"},
        secret=HMAC_SECRET,
        timestamp_ms=now_ms - age_seconds * 1000,
    )
    response = client.post("/api/webhooks/waha/loja", body, content_type="application/json",
                           headers=headers)  # fmt: skip
    assert response.status_code == 400 and "timestamp" in response.json()["error"]
    session.refresh_from_db()
    assert session.status != "FAILED"


def test_the_window_is_a_setting_and_a_replayed_event_id_is_a_duplicate(
    client: Client, session: WahaSession, settings: Any
) -> None:
    settings.WHATSAPP = {**getattr(settings, "WHATSAPP", {}), "WEBHOOK_WINDOW_SECONDS": 60}
    now_ms = int(time.time() * 1000)

    def send(body: bytes, headers: dict[str, str]) -> Any:
        return client.post("/api/webhooks/waha/loja", body, content_type="application/json",
                           headers=headers)  # fmt: skip

    old = signed_webhook("loja", "message", inbound_message(CHAT, "a"), secret=HMAC_SECRET,
                         timestamp_ms=now_ms - 90_000)  # fmt: skip
    assert send(*old).status_code == 400
    fresh = signed_webhook("loja", "message", inbound_message(CHAT, "b"), secret=HMAC_SECRET,
                           event_id="evt_same", timestamp_ms=now_ms - 30_000)  # fmt: skip
    assert send(*fresh).json() == {"result": "stored"}
    before = counts()
    assert send(*fresh).json() == {"result": "duplicate"}
    # Another payload under an id already accepted is a duplicate too (a replay, re-signed).
    other = signed_webhook("loja", "message", inbound_message(CHAT, "c"), secret=HMAC_SECRET,
                           event_id="evt_same")  # fmt: skip
    assert send(*other).json() == {"result": "duplicate"}
    assert counts() == before


@pytest.mark.parametrize("said", ["SAIR", "  Parár! ", "descadastrar", "Stop."])
def test_a_stop_keyword_blocks_the_contact_and_the_next_send_is_blocked(
    live_server: object, session: WahaSession, waha: FakeWaha, said: str
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    assert deliver(base, "message", inbound_message(CHAT, said))[1] == {"result": "stored"}
    contact = Contact.objects.get()
    assert contact.blocked_at is not None and contact.blocked_reason == "stop_keyword"
    stop = EventLog.objects.get(event_type="system.contact_blocked_by_stop")
    assert stop.payload["contact_id"] == str(contact.pk)
    blocked = EventLog.objects.get(event_type="contact.blocked")
    assert blocked.payload == {"contact_id": str(contact.pk), "reason": "stop_keyword"}

    message = send_message(conversation=Conversation.objects.get(), body="Promoção!")
    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()
    message.refresh_from_db()
    assert message.status == "blocked" and message.error_code == "contact_blocked"
    (refused,) = EventLog.objects.filter(event_type="system.send_blocked")
    assert refused.payload["reason"] == "contact_blocked"
    assert refused.payload["contact_id"] == str(contact.pk)
    assert waha.sends() == []  # nothing reached WhatsApp


@pytest.mark.parametrize("said", ["quero sair da lista", "stopped", "sairr"])
def test_a_message_that_only_contains_a_keyword_does_not_block(
    live_server: object, session: WahaSession, said: str
) -> None:
    deliver(live_server.url, "message", inbound_message(CHAT, said))  # type: ignore[attr-defined]
    assert Contact.objects.get().blocked_at is None
    assert not EventLog.objects.filter(event_type="contact.blocked").exists()


def test_acks_mark_the_sent_message_delivered_then_read_once_each(
    live_server: object, session: WahaSession, waha: FakeWaha
) -> None:
    base = live_server.url  # type: ignore[attr-defined]
    deliver(base, "message", inbound_message(CHAT, "Oi"))
    message = send_message(conversation=Conversation.objects.get(), body="Olá, Maria!")
    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()
    message.refresh_from_db()
    assert message.status == "sent"
    ack = {"id": message.external_id, "from": CHAT, "fromMe": True, "ack": 2, "ackName": "DEVICE"}
    assert deliver(base, "message.ack", ack)[1] == {"result": "ack"}
    message.refresh_from_db()
    assert message.status == "delivered" and message.delivered_at is not None
    assert deliver(base, "message.ack", ack)[1] == {"result": "ack"}  # again: nothing new
    assert deliver(base, "message.ack", {**ack, "ack": 3, "ackName": "READ"})[1] == {
        "result": "ack"
    }
    message.refresh_from_db()
    assert message.status == "read" and message.read_at is not None
    assert EventLog.objects.filter(event_type="message.delivered").count() == 1
    (read,) = EventLog.objects.filter(event_type="message.read")
    assert read.payload["message_id"] == str(message.pk)
    # Our own message echoed by message.any is not stored as inbound.
    echo = {**inbound_message(CHAT, "Olá, Maria!"), "fromMe": True, "id": message.external_id}
    assert deliver(base, "message.any", echo)[1] == {"result": "ignored"}
    assert Message.objects.filter(direction="inbound").count() == 1


def test_a_session_status_webhook_stores_the_status_and_emits_session_changed(
    live_server: object, session: WahaSession
) -> None:
    payload = {"name": "loja", "status": "SCAN_QR_CODE"}
    assert deliver(live_server.url, "session.status", payload)[1] == {"result": "status"}  # type: ignore[attr-defined]
    session.refresh_from_db()
    assert session.status == "SCAN_QR_CODE"
    (changed,) = EventLog.objects.filter(event_type="system.session_changed")
    assert changed.payload == {
        "session_id": str(session.pk),
        "session": "loja",
        "from_status": "WORKING",
        "to_status": "SCAN_QR_CODE",
    }


def test_inbound_webhooks_are_counted_by_result(live_server: object, session: WahaSession) -> None:
    from tests.whatsapp.test_health import sample

    name = "deskcomm_whatsapp_webhooks_total"
    stored, refused = sample(name, 'result="stored"'), sample(name, 'result="unauthorized"')
    deliver(live_server.url, "message", inbound_message(CHAT, "Oi"))  # type: ignore[attr-defined]
    body, headers = signed_webhook("loja", "message", inbound_message(CHAT, "x"), secret="bad")
    post(live_server.url, "loja", body, headers)  # type: ignore[attr-defined]
    assert sample(name, 'result="stored"') == stored + 1
    assert sample(name, 'result="unauthorized"') == refused + 1


def test_a_reply_to_a_first_outbound_message_lands_in_its_conversation(
    live_server: object, session: WahaSession, waha: FakeWaha
) -> None:
    from django.utils import timezone

    from tests.support.factories import ConversationFactory

    conversation = ConversationFactory(
        organization=session.organization,
        external_chat_id="",
        contact__phone="+55 11 97777-6666",
        last_inbound_at=timezone.now(),
    )
    send_message(conversation=conversation, body="Olá! Seu pedido chegou?")
    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()
    (call,) = waha.sends()
    assert call.body is not None and call.body["chatId"] == CHAT
    deliver(live_server.url, "message", inbound_message(CHAT, "Chegou sim"))  # type: ignore[attr-defined]
    assert Conversation.objects.count() == Contact.objects.count() == 1
    assert conversation.messages.filter(direction="inbound").count() == 1


def test_the_receiver_works_in_a_web_process_that_fails_closed(
    enforced: None, session: WahaSession
) -> None:
    """Production's web processes see no tenant's rows until a view scopes itself: the receiver
    finds the session (bypass, for that lookup only) and writes in the session's tenant."""
    client = Client()
    body, headers = signed_webhook(
        "loja", "message", inbound_message(CHAT, "Oi", name="Ana"), secret=HMAC_SECRET
    )
    with as_web_process():
        response = client.post(
            "/api/webhooks/waha/loja",
            data=body,
            content_type="application/json",
            headers={k: v for k, v in headers.items() if k.lower() != "content-type"},
        )
        assert response.status_code == 200, response.content
        assert Message.objects.count() == 0  # the test's own session is closed too
    message = Message.objects.get()
    assert message.organization_id == session.organization_id
    assert EventLog.objects.filter(event_type="message.received").count() == 1
