"""The send path: a queued outbound message becomes exactly one WhatsApp message, or a recorded
refusal or failure (seed 000 §6.1).

`send(message_id)` is what `whatsapp-send-worker` runs for each `message.queued`:

1. A message already sent (it has WAHA's id) only has `message.sent` emitted again, under an
   idempotency key per message: one event whatever the number of retries.
2. A queued message is checked against the send blockers (contact blocked by STOP, consent
   withdrawn, 24 h window closed for a non-template message): refused as `blocked` with
   `system.send_blocked`, nothing sent.
3. Before WAHA is called, the message is marked `sending` in its own committed transaction, and
   WAHA's id is stored right after WAHA answers (with `message.sent`, in one transaction).
4. A retry that finds `sending` and no id does not resend blindly: the worker that called WAHA
   may have died after WAHA accepted the send. It reads the chat's latest messages from WAHA
   (`GET /api/{session}/chats/{chatId}/messages`) and takes a message sent by us (`fromMe`)
   with the same text, no older than the `sending` mark (minus the allowed clock skew) and not
   already the id of another message of the organization. Found: that is our send (id stored,
   `message.sent`). Not found: WAHA did not accept it, so it is sent again. WAHA has no
   client-side message id to ask by, hence the match on text and time (see
   docs/integrations/whatsapp.md, "residual window").

One send per message at a time: a session-level advisory lock on the message id is held around
the lookup and the call (a killed worker's lock goes with its connection).
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

import eventbus
from core import pooler
from core.db import conninfo
from crm.conf import crm_settings
from crm.models import ConsentRecord, Conversation, Message
from whatsapp import client as waha
from whatsapp import metrics
from whatsapp.conf import whatsapp_settings
from whatsapp.inbound import apply_pending_acks
from whatsapp.models import WahaSession

logger = logging.getLogger(__name__)

LOCK_SQL = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"
UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtextextended(%s, 0))"


class SendRetry(Exception):
    """A send that may succeed later (WAHA down, rate limited, busy): the bus retries it."""


@dataclass(frozen=True)
class Outcome:
    """What `send` did: sent, recovered (found already sent), resent, blocked, failed, skipped."""

    result: str
    waha_message_id: str = ""
    error_code: str = ""


def send(message_id: uuid.UUID | str, *, last_attempt: bool = False) -> Outcome:
    message = (
        Message.objects.select_related("conversation", "conversation__contact")
        .filter(pk=message_id, direction=Message.Direction.OUTBOUND)
        .first()
    )
    if message is None:
        return Outcome("skipped")
    if message.external_id:
        _mark_sent(message, message.external_id)
        return Outcome("sent", message.external_id)
    if message.status == Message.Status.BLOCKED:
        return Outcome("skipped")
    if message.status == Message.Status.FAILED:
        message = _retry_failed(message)  # the dead-lettered delivery was reprocessed
    if message.status == Message.Status.QUEUED:
        reason = blocker(message)
        if reason:
            _block(message, reason)
            metrics.SENDS.labels("blocked").inc()
            return Outcome("blocked")
    session = default_session(message.organization_id)
    if session is None:
        fail_message(message, "no_session", "no WAHA session is configured", retryable=False)
        return Outcome("failed", error_code="no_session")
    with _send_lock(f"whatsapp-send:{message.pk}") as locked:
        if not locked:
            raise SendRetry(f"message {message.pk} is being sent by another worker")
        return _send_locked(message, session, last_attempt=last_attempt)


@contextmanager
def _send_lock(key: str) -> Iterator[bool]:
    """The session-level lock on `key` (True when taken), released at the block's end. Past a
    transaction-mode pooler (core.pooler) it is held on a direct connection of its own: the
    pooler would run the unlock on another server session."""
    if pooler.pooled():
        with psycopg.connect(conninfo(), autocommit=True) as conn:  # closing it unlocks
            row = conn.execute(LOCK_SQL, [key]).fetchone()
            yield bool(row and row[0])
        return
    with connection.cursor() as cursor:
        cursor.execute(LOCK_SQL, [key])
        locked = bool(cursor.fetchone()[0])
    try:
        yield locked
    finally:
        if locked:
            with connection.cursor() as cursor:
                cursor.execute(UNLOCK_SQL, [key])


def _send_locked(message: Message, session: WahaSession, *, last_attempt: bool) -> Outcome:
    message.refresh_from_db()
    if message.external_id:
        _mark_sent(message, message.external_id)
        return Outcome("sent", message.external_id)
    now = timezone.now()
    if session.paused_until and session.paused_until > now:
        raise SendRetry(f"WAHA rate-limited session {session.name} until {session.paused_until}")
    target = waha.Target(session.effective_base_url, session.name, session.api_key)
    try:
        chat_id = _chat_id(message)
    except waha.WahaError as exc:
        fail_message(message, exc.code, str(exc), retryable=False)
        return Outcome("failed", error_code=exc.code)
    if len(message.media_urls) > 1:
        fail_message(message, "too_many_media", "one media URL per message", retryable=False)
        return Outcome("failed", error_code="too_many_media")
    with waha.send_client() as http:
        result = "sent"
        if message.status == Message.Status.SENDING:
            found = _look_up(http, target, chat_id, message)
            if found:
                _mark_sent(message, found)
                metrics.SENDS.labels("recovered").inc()
                return Outcome("recovered", found)
            result = "resent"
        else:
            updated = Message.objects.filter(pk=message.pk, status=Message.Status.QUEUED).update(
                status=Message.Status.SENDING, updated_at=now
            )  # committed now (autocommit): a crash from here on is seen as `sending`
            if not updated:
                raise SendRetry(f"message {message.pk} changed under the worker; retry")
        Message.objects.filter(pk=message.pk).update(attempts=F("attempts") + 1)
        try:
            with metrics.send_timer() as timed:
                if message.media_urls:
                    sent = waha.send_media(
                        http, target, chat_id, str(message.media_urls[0]), message.body
                    )
                else:
                    sent = waha.send_text(http, target, chat_id, message.body)
                timed.outcome = "sent"
        except waha.WahaError as exc:
            return _failed_call(message, session, exc, last_attempt=last_attempt)
    _mark_sent(message, sent.id)
    metrics.SENDS.labels(result).inc()
    return Outcome(result, sent.id)


def _failed_call(
    message: Message, session: WahaSession, exc: waha.WahaError, *, last_attempt: bool
) -> Outcome:
    if exc.status == 422 and _starting(session):
        # A session that is (re)starting answers 422 too: not a logout, wait for it.
        exc = waha.WahaError(str(exc), code="session_starting", retryable=True, status=422)
    if exc.retryable and exc.refused:
        # WAHA answered (429): it certainly did not take the message, no lookup needed next.
        Message.objects.filter(pk=message.pk, status=Message.Status.SENDING).update(
            status=Message.Status.QUEUED
        )
        if exc.retry_after:
            pause = min(exc.retry_after, whatsapp_settings.MAX_RETRY_AFTER)
            WahaSession.objects.filter(pk=session.pk).update(
                paused_until=timezone.now() + dt.timedelta(seconds=pause)
            )
    if exc.retryable and not last_attempt:
        metrics.SENDS.labels("retry").inc()
        Message.objects.filter(pk=message.pk).update(
            error_code=exc.code, error_message=str(exc)[:2000]
        )
        raise SendRetry(str(exc)) from None
    fail_message(message, exc.code, str(exc), retryable=exc.retryable)
    return Outcome("failed", error_code=exc.code)


# Failures after which WAHA certainly did not take the message (it answered, or nothing was
# sent): a reprocessed delivery sends it again at once; after any other failure (a timeout, a
# 5xx, `stuck`) it first looks for it in the chat, like any `sending` message.
REFUSED_CODES = frozenset(
    {
        "no_session",
        "no_chat_id",
        "too_many_media",
        "not_configured",
        "blocked",
        "rate_limited",
        "session_starting",
    }
)


def _retry_failed(message: Message) -> Message:
    """A failed message whose delivery runs again (Reprocess from the DLQ): back to `queued`
    (blockers checked again) or `sending` (looked for in the chat first)."""
    refused = message.error_code in REFUSED_CODES or message.error_code.startswith("http_4")
    status = Message.Status.QUEUED if refused else Message.Status.SENDING
    Message.objects.filter(pk=message.pk, status=Message.Status.FAILED).update(
        status=status, updated_at=timezone.now()
    )
    message.refresh_from_db()
    return message


def _chat_id(message: Message) -> str:
    """The conversation's chat id, or the contact's number's (then remembered: the contact's
    replies, found by chat id, land in this conversation)."""
    if message.conversation.external_chat_id:
        return message.conversation.external_chat_id
    chat_id = waha.chat_id_for(message.conversation.contact.phone)
    Conversation.objects.filter(pk=message.conversation_id, external_chat_id="").update(
        external_chat_id=chat_id
    )
    return chat_id


def _starting(session: WahaSession) -> bool:
    """WAHA lists the session as STARTING (a 422 then is transient); False if it cannot tell."""
    try:
        with waha.send_client() as http:
            listed = waha.sessions(http, session.effective_base_url, session.api_key)
    except waha.WahaError:
        return False
    return any(s.get("name") == session.name and s.get("status") == "STARTING" for s in listed)


def _look_up(http: object, target: waha.Target, chat_id: str, message: Message) -> str | None:
    """`find_sent`, or SendRetry when WAHA cannot tell (the message is then not resent)."""
    try:
        return find_sent(http, target, chat_id, message)
    except waha.WahaError as exc:
        if not exc.retryable:  # e.g. NOWEB without its store: WAHA cannot list chats
            logger.warning(
                "whatsapp message %s: WAHA cannot list the chat (%s); enable the session's "
                "store (config.noweb.store.enabled) or it is never resent",
                message.pk,
                exc.code,
            )
        raise SendRetry(f"cannot tell whether the last try was sent: {exc}") from None


def find_sent(http: object, target: waha.Target, chat_id: str, message: Message) -> str | None:
    """WAHA's id of our message if an earlier try was accepted (see the module docstring)."""
    import httpx

    assert isinstance(http, httpx.Client)
    recent = waha.chat_messages(http, target, chat_id, limit=whatsapp_settings.RECOVERY_LOOKBACK)
    since = message.updated_at.timestamp() - whatsapp_settings.RECOVERY_SKEW_SECONDS
    recent = [
        {**item, "id": waha.normalize_message_id(item["id"])}
        for item in recent
        if isinstance(item.get("id"), str)
    ]
    candidates = [
        item
        for item in recent
        if item.get("fromMe") is True
        and (item.get("body") or "") == message.body
        and isinstance(item.get("timestamp"), int | float)
        and float(item["timestamp"]) >= since
    ]
    if not candidates:
        return None
    taken = set(
        Message.objects.filter(
            organization_id=message.organization_id,
            external_id__in=[str(item["id"]) for item in candidates],
        ).values_list("external_id", flat=True)
    )
    free = sorted(
        (item for item in candidates if item["id"] not in taken), key=lambda i: i["timestamp"]
    )
    return str(free[0]["id"]) if free else None


def blocker(message: Message) -> str | None:
    """Why this message must not be sent, or None (checked before anything is sent)."""
    return conversation_blocker(message.conversation, message.is_template)


def conversation_blocker(conversation: Conversation, is_template: bool) -> str | None:
    """Why a message on this conversation would be refused now, or None: the contact blocked,
    the consent withdrawn, or (not for a template) the 24 h window closed. The CRM asks it
    before queueing (crm.services.send_refusal, registered by WhatsappConfig.ready)."""
    contact = conversation.contact
    if contact.blocked_at is not None:
        return "contact_blocked"
    latest = (
        ConsentRecord.objects.filter(contact=contact, consent_type=whatsapp_settings.CONSENT_TYPE)
        .order_by("-recorded_at", "-id")
        .first()
    )
    if latest is not None and not latest.granted:
        return "no_consent"
    if not is_template:
        window = dt.timedelta(hours=crm_settings.WINDOW_HOURS)
        if conversation.last_inbound_at is None or (
            timezone.now() - conversation.last_inbound_at > window
        ):
            return "window_closed"
    return None


def default_session(organization_id: uuid.UUID) -> WahaSession | None:
    return (
        WahaSession.objects.filter(organization_id=organization_id)
        .order_by("-is_default", "created_at")
        .first()
    )


def _payload(message: Message) -> dict[str, str]:
    return {
        "message_id": str(message.pk),
        "conversation_id": str(message.conversation_id),
        "contact_id": str(message.conversation.contact_id),
        "direction": message.direction,
        "channel": message.conversation.channel,
    }


def _mark_sent(message: Message, waha_id: str) -> None:
    """Store WAHA's id and emit `message.sent` once per message (idempotency key)."""
    with transaction.atomic():
        now = timezone.now()
        stored = Message.objects.filter(pk=message.pk, external_id="").update(
            external_id=waha_id, updated_at=now
        )
        Message.objects.filter(
            pk=message.pk,
            status__in=[Message.Status.QUEUED, Message.Status.SENDING, Message.Status.FAILED],
        ).update(status=Message.Status.SENT, sent_at=now, error_code="", error_message="")
        eventbus.emit(
            "message.sent",
            organization=message.organization_id,
            entity_kind="message",
            entity_id=message.pk,
            payload={**_payload(message), "waha_message_id": waha_id},
            idempotency_key=f"message.sent:{message.pk}",
        )
        if stored:
            message.external_id = waha_id
            apply_pending_acks(message)  # receipts that came before the id (inbound.ack)


def _block(message: Message, reason: str) -> None:
    with transaction.atomic():
        Message.objects.filter(pk=message.pk, status=Message.Status.QUEUED).update(
            status=Message.Status.BLOCKED, error_code=reason, updated_at=timezone.now()
        )
        eventbus.emit(
            "system.send_blocked",
            organization=message.organization_id,
            entity_kind="message",
            entity_id=message.pk,
            payload={
                "contact_id": str(message.conversation.contact_id),
                "reason": reason,
                "message_id": str(message.pk),
                "conversation_id": str(message.conversation_id),
            },
            idempotency_key=f"system.send_blocked:{message.pk}",
        )


def fail_message(message: Message, code: str, detail: str, *, retryable: bool) -> None:
    """Mark the message failed and emit `message.failed` (WAHA's text stays on the row: it may
    echo the chat id, a phone number; the event carries the code only)."""
    with transaction.atomic():
        Message.objects.filter(pk=message.pk).exclude(status=Message.Status.SENT).update(
            status=Message.Status.FAILED,
            error_code=code,
            error_message=detail[:2000],
            updated_at=timezone.now(),
        )
        eventbus.emit(
            "message.failed",
            organization=message.organization_id,
            entity_kind="message",
            entity_id=message.pk,
            payload={
                "message_id": str(message.pk),
                "error_code": code,
                "error_message": f"send failed: {code}",
                "retryable": retryable,
            },
            idempotency_key=f"message.failed:{message.pk}",
        )
    metrics.SENDS.labels("failed").inc()
    logger.warning("whatsapp message %s failed: %s", message.pk, code)
