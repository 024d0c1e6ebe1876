"""The send worker through `drain_events` subprocesses and in-process, against the fake WAHA."""

from __future__ import annotations

import signal

import pytest

from crm.models import Conversation, Message
from crm.services import send_message
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.operations.services import deliveries_reprocess
from eventbus.store.models import Delivery, EventLog
from tests.support.processes import Drain, start_drain
from tests.support.waha import FakeWaha, Misbehaviour
from tests.support.waiting import wait_for
from tests.whatsapp.conftest import subprocess_settings_env
from whatsapp.conf import SEND_CONSUMER
from whatsapp.models import WahaSession

pytestmark = pytest.mark.django_db(transaction=True)


def events(event_type: str) -> list[EventLog]:
    return list(EventLog.objects.filter(event_type=event_type).order_by("created_at"))


def drain_once() -> None:
    Worker(
        WorkerOptions(consumers=[SEND_CONSUMER], once=True, listen=False, startup_jitter=0)
    ).run()


def test_a_sigkilled_worker_after_waha_accepted_the_send_never_sends_twice(
    session: WahaSession, waha: FakeWaha, conversation: Conversation, processes: list[Drain]
) -> None:
    # WAHA takes the message, then hangs without answering: the worker is killed right there.
    waha.fail_next(Misbehaviour(accept_then_drop=True, hold=True))
    message = send_message(conversation=conversation, body="Seu pedido saiu para entrega")
    env = subprocess_settings_env(waha)
    first = start_drain(
        "--consumer", SEND_CONSUMER, "--poll-interval", "0.2", EVENTBUS_LEASE_SECONDS="3", **env
    )
    processes.append(first)
    assert waha.accepted.wait(timeout=60), first.output()
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    waha.release.set()
    message.refresh_from_db()
    assert message.status == "sending" and message.external_id == ""  # died before the answer

    second = start_drain("--consumer", SEND_CONSUMER, "--poll-interval", "0.2", **env)
    processes.append(second)
    wait_for(
        lambda: EventLog.objects.filter(event_type="message.sent").exists(),
        timeout=90,
        what=second.output,
    )
    message.refresh_from_db()
    assert len(waha.sends()) == 1  # exactly one WhatsApp message
    accepted = waha.chats[conversation.external_chat_id]
    assert message.status == "sent" and message.external_id == accepted[0]["id"]
    sent = events("message.sent")
    assert len(sent) == 1
    assert sent[0].payload == {
        "message_id": str(message.pk),
        "conversation_id": str(conversation.pk),
        "contact_id": str(conversation.contact_id),
        "direction": "outbound",
        "channel": "whatsapp",
        "waha_message_id": message.external_id,
    }
    assert "body" not in sent[0].payload
    wait_for(
        lambda: (
            set(Delivery.objects.filter(consumer=SEND_CONSUMER).values_list("status", flat=True))
            == {"done"}
        ),
        timeout=30,
        what="the delivery to be acked",
    )


def test_a_send_goes_out_once_and_a_replayed_delivery_only_re_emits_sent(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    message = send_message(conversation=conversation, body="Olá!")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent" and message.external_id.startswith("true_")
    (call,) = waha.sends()
    assert call.path == "/api/sendText"
    assert call.headers["x-api-key"] == "waha-test-key"  # pragma: allowlist secret
    assert call.body == {"session": "loja", "chatId": "5511988887777@c.us", "text": "Olá!"}
    # The same event delivered again (an operator's replay): no second send, no second event.
    from whatsapp.sending import send

    assert send(message.pk).result == "sent"
    assert len(waha.sends()) == 1 and len(events("message.sent")) == 1


def test_an_answer_lost_after_waha_accepted_is_found_by_the_retry(
    session: WahaSession, waha: FakeWaha, conversation: Conversation, settings: object
) -> None:
    waha.fail_next(Misbehaviour(accept_then_drop=True))
    message = send_message(conversation=conversation, body="Pedido confirmado")
    drain_once()  # the connection dropped: a retryable failure, still `sending`
    message.refresh_from_db()
    assert message.status == "sending" and message.attempts == 1
    Delivery.objects.filter(consumer=SEND_CONSUMER).update(next_attempt_at="2000-01-01T00:00Z")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent" and len(waha.sends()) == 1
    assert message.attempts == 1  # recovered, not resent


@pytest.mark.parametrize(
    ("misbehaviour", "code"),
    [
        (Misbehaviour(status=500), "http_500"),
        (Misbehaviour(status=429, headers={"Retry-After": "1"}), "rate_limited"),
        (Misbehaviour(delay=3.0), "timeout"),  # taken, answered past the client's 2 s timeout
    ],
    ids=["5xx", "429", "timeout"],
)
def test_transient_failures_are_retried_and_then_sent_once(
    session: WahaSession,
    waha: FakeWaha,
    conversation: Conversation,
    misbehaviour: Misbehaviour,
    code: str,
) -> None:
    waha.fail_next(misbehaviour)
    message = send_message(conversation=conversation, body="Tudo certo?")
    drain_once()
    message.refresh_from_db()
    assert message.error_code == code and message.status in ("queued", "sending")
    delivery = Delivery.objects.get(consumer=SEND_CONSUMER)
    assert delivery.status == "pending" and delivery.attempts == 1
    if code == "rate_limited":
        session.refresh_from_db()
        assert session.paused_until is not None  # Retry-After honoured: no call before it
        WahaSession.objects.filter(pk=session.pk).update(paused_until=None)
    Delivery.objects.filter(pk=delivery.pk).update(next_attempt_at="2000-01-01T00:00Z")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent"
    # The timed-out request was taken by WAHA: the retry found it, it was not resent.
    assert len(waha.chats[conversation.external_chat_id]) == 1
    assert len(events("message.sent")) == 1 and events("message.failed") == []


@pytest.mark.parametrize("status_of_session", ["SCAN_QR_CODE", "STOPPED"])
def test_a_logged_out_session_is_a_permanent_failure(
    session: WahaSession, waha: FakeWaha, conversation: Conversation, status_of_session: str
) -> None:
    waha.sessions["loja"] = status_of_session  # WAHA answers 422
    message = send_message(conversation=conversation, body="Oi")
    drain_once()
    message.refresh_from_db()
    assert message.status == "failed" and message.error_code == "http_422"
    (failed,) = events("message.failed")
    assert failed.payload == {
        "message_id": str(message.pk),
        "error_code": "http_422",
        "error_message": "send failed: http_422",
        "retryable": False,
    }
    # Not retried: dead-lettered at once (the DLQ, its alert; Reprocess once WAHA is paired).
    assert Delivery.objects.get(consumer=SEND_CONSUMER).status == "dead"
    assert events("message.sent") == []


def test_an_invalid_chat_id_is_a_permanent_failure(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(external_chat_id="not-a-chat")
    message = send_message(conversation=conversation, body="Oi")
    drain_once()
    message.refresh_from_db()
    assert message.status == "failed" and message.error_code == "http_400"
    assert len(waha.sends()) == 1


def test_the_last_attempt_of_a_transient_failure_marks_the_message_failed(
    session: WahaSession, waha: FakeWaha, conversation: Conversation, settings: object
) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "CONSUMER_MAX_ATTEMPTS": {SEND_CONSUMER: 1}}  # type: ignore[attr-defined]
    waha.fail_next(Misbehaviour(status=503))
    message = send_message(conversation=conversation, body="Oi")
    drain_once()
    message.refresh_from_db()
    assert message.status == "failed" and message.error_code == "http_503"
    (failed,) = events("message.failed")
    assert failed.payload["retryable"] is True
    delivery = Delivery.objects.get(consumer=SEND_CONSUMER)
    assert delivery.status == "dead"  # in the DLQ (and its alert), not `done`
    # Reprocessed from the DLQ: WAHA may have taken the 503'd request, so the chat is read
    # first (nothing there), then the message is sent.
    deliveries_reprocess(delivery_ids=[delivery.pk], actor="ops")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent" and len(waha.sends()) == 2
    assert [c.path for c in waha.calls if "/chats/" in c.path] != []


def test_a_media_message_goes_through_send_image_with_its_caption(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    send_message(
        conversation=conversation, body="Seu boleto", media_urls=["https://cdn.example.com/a.png"]
    )
    drain_once()
    (call,) = waha.sends()
    assert call.path == "/api/sendImage"
    assert call.body is not None and call.body["caption"] == "Seu boleto"
    assert call.body["file"] == {
        "mimetype": "image/png",
        "filename": "a.png",
        "url": "https://cdn.example.com/a.png",
    }
    assert Message.objects.get(direction="outbound").status == "sent"


@pytest.mark.parametrize(
    ("setup", "is_template", "reason"),
    [
        ("consent_withdrawn", False, "no_consent"),
        ("window_closed", False, "window_closed"),
        ("never_wrote", False, "window_closed"),
        ("window_closed", True, None),  # a template may go outside the window
        ("consent_granted_again", False, None),
    ],
)
def test_the_send_blockers_refuse_before_anything_is_sent(
    session: WahaSession,
    waha: FakeWaha,
    conversation: Conversation,
    setup: str,
    is_template: bool,
    reason: str | None,
) -> None:
    import datetime as dt

    from django.utils import timezone

    from crm.models import ConsentRecord

    now = timezone.now()
    if setup.startswith("consent"):
        ConsentRecord.objects.create(
            organization_id=conversation.organization_id,
            contact=conversation.contact,
            consent_type="marketing_whatsapp",
            granted=False,
            source="whatsapp",
            recorded_at=now - dt.timedelta(days=2),
        )
    if setup == "consent_granted_again":
        ConsentRecord.objects.create(
            organization_id=conversation.organization_id,
            contact=conversation.contact,
            consent_type="marketing_whatsapp",
            granted=True,
            source="web_form",
            recorded_at=now - dt.timedelta(days=1),
        )
    if setup == "window_closed":
        Conversation.objects.filter(pk=conversation.pk).update(
            last_inbound_at=now - dt.timedelta(hours=25)
        )
    if setup == "never_wrote":
        Conversation.objects.filter(pk=conversation.pk).update(last_inbound_at=None)
    message = send_message(conversation=conversation, body="Oferta", is_template=is_template)
    drain_once()
    message.refresh_from_db()
    if reason is None:
        assert message.status == "sent" and len(waha.sends()) == 1
        return
    assert message.status == "blocked" and message.error_code == reason
    (blocked,) = events("system.send_blocked")
    assert blocked.payload == {
        "contact_id": str(conversation.contact_id),
        "reason": reason,
        "message_id": str(message.pk),
        "conversation_id": str(conversation.pk),
    }
    assert waha.sends() == [] and events("message.sent") == []


def test_waha_message_ids_are_read_from_every_documented_answer_shape() -> None:
    from whatsapp.client import message_id_of

    assert message_id_of({"id": "true_1@c.us_AA"}) == "true_1@c.us_AA"
    assert message_id_of({"id": {"_serialized": "true_1@c.us_BB", "id": "BB"}}) == "true_1@c.us_BB"
    noweb = {"key": {"remoteJid": "1@s.whatsapp.net", "fromMe": True, "id": "CC"}}
    assert message_id_of(noweb) == "true_1@c.us_CC"  # as WAHA's webhooks and acks spell it


def test_a_session_still_starting_is_waited_for_not_failed(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    waha.sessions["loja"] = "STARTING"  # WAHA answers 422 to the send
    message = send_message(conversation=conversation, body="Oi")
    drain_once()
    message.refresh_from_db()
    assert message.status == "queued" and message.error_code == "session_starting"
    assert Delivery.objects.get(consumer=SEND_CONSUMER).status == "pending"
    waha.sessions["loja"] = "WORKING"
    Delivery.objects.filter(consumer=SEND_CONSUMER).update(next_attempt_at="2000-01-01T00:00Z")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sent" and events("message.failed") == []


def test_a_send_whose_fate_waha_cannot_tell_is_never_resent(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    # The answer is lost, and WAHA then cannot list the chat (NOWEB without its store).
    waha.fail_next(Misbehaviour(accept_then_drop=True))
    message = send_message(conversation=conversation, body="Oi")
    drain_once()
    waha.chats.clear()
    waha.api_key = "no-listing-now"  # pragma: allowlist secret  (every call answers 401)
    Delivery.objects.filter(consumer=SEND_CONSUMER).update(next_attempt_at="2000-01-01T00:00Z")
    drain_once()
    message.refresh_from_db()
    assert message.status == "sending" and message.attempts == 1
    assert len(waha.sends()) == 1  # asked, got no answer, did not send again
    assert Delivery.objects.get(consumer=SEND_CONSUMER).status == "pending"


def test_one_conversations_messages_go_out_in_queue_order_a_retry_holding_the_next(
    session: WahaSession, waha: FakeWaha, conversation: Conversation
) -> None:
    # The sender is an ordered consumer (by conversation): the second message waits for the
    # first, which WAHA refuses once with a 500.
    waha.fail_next(Misbehaviour(status=500))
    first = send_message(conversation=conversation, body="Primeira")
    second = send_message(conversation=conversation, body="Segunda")
    drain_once()
    assert [(c.body or {}).get("text") for c in waha.sends()] == ["Primeira"]  # second waits
    second.refresh_from_db()
    assert second.status == "queued"
    Delivery.objects.filter(consumer=SEND_CONSUMER, status="pending").update(
        next_attempt_at="2000-01-01T00:00Z"
    )
    drain_once()
    drain_once()  # the second becomes its conversation's next once the first is sent
    chat = waha.chats[conversation.external_chat_id]
    assert [m["body"] for m in chat] == ["Primeira", "Segunda"]
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.status, second.status) == ("sent", "sent")
