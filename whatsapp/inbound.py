"""What a verified WAHA webhook writes (rows and events only: no HTTP from the request).

- `message` (and `message.any` not sent by us): the inbound Message, idempotent by WAHA's message
  id (`Message.external_id`, unique per organization: a redelivered webhook writes nothing);
  the conversation found by chat id, else the contact resolved by the chat's phone or lid
  (`crm.services.contact_resolve`, race-free) and its conversation, opened once
  (`conversation.opened`);
  `message.received` v2 (ids only); a stop keyword blocks the contact (`contact.blocked`,
  `system.contact_blocked_by_stop`); a start keyword from a contact blocked by STOP unblocks it
  (crm.conversations.opt_in, audited as `contact.opted_in`).
  A sender WhatsApp addresses by its privacy id (`<n>@lid`, no phone number) is stored too: its
  conversation's chat id is the lid (replies go to it) and its contact has no phone until
  `sync-sessions` resolves the lid through WAHA (`GET /api/{session}/lids/{lid}`).
- `message.ack`: an outbound message delivered (ack 2, DEVICE) or read (3 READ, 4 PLAYED):
  `message.delivered` / `message.read`, once each. Message ids are compared normalized across
  WAHA's engines (`client.normalize_message_id`), then by WhatsApp's key alone (a receipt
  addressed to the `@lid` chat); a receipt for a message whose id is not stored yet is kept
  (`PendingAck`) and applied when the send stores the id.
- `session.status`: the session's stored status (`system.session_changed` when it changed).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

import eventbus
from crm.conversations import opt_in
from crm.models import Contact, Conversation, Message
from crm.services import contact_resolve, conversation_for
from whatsapp.client import message_key, normalize_chat_id, normalize_message_id
from whatsapp.models import PendingAck, WahaSession
from whatsapp.stop import start_keyword, stop_keyword

ACK_DELIVERED = 2
ACK_READ = (3, 4)


def handle(session: WahaSession, body: dict[str, Any]) -> str:
    """Apply one webhook; returns the result label (stored, duplicate, ack, status, ignored)."""
    event = body.get("event")
    payload = body.get("payload")
    if not isinstance(payload, dict):
        return "ignored"
    if event == "message" or (event == "message.any" and payload.get("fromMe") is False):
        if payload.get("fromMe"):
            return "ignored"
        return receive(session, payload)
    if event == "message.ack":
        return ack(session, payload)
    if event == "session.status":
        status = payload.get("status")
        if isinstance(status, str) and status in WahaSession.Status.values:
            record_status(session, status)
            return "status"
    return "ignored"


LID_SERVER = "@lid"


def receive(session: WahaSession, payload: dict[str, Any]) -> str:
    waha_id = payload.get("id")
    chat_id = payload.get("from")
    if not isinstance(waha_id, str) or not waha_id or not isinstance(chat_id, str):
        return "ignored"
    if not chat_id.endswith(("@c.us", "@s.whatsapp.net", LID_SERVER)):
        return "ignored"  # groups, broadcasts, newsletters: not a customer conversation
    waha_id, chat_id = normalize_message_id(waha_id), normalize_chat_id(chat_id)
    org_id = session.organization_id
    if Message.objects.filter(organization_id=org_id, external_id=waha_id).exists():
        return "duplicate"
    try:
        with transaction.atomic():
            return _store(session, payload, waha_id, chat_id)
    except IntegrityError:  # the same webhook, concurrently: the other request stored it
        return "duplicate"


def _store(session: WahaSession, payload: dict[str, Any], waha_id: str, chat_id: str) -> str:
    org_id = session.organization_id
    sent_at = _when(payload.get("timestamp"))
    conversation = (
        Conversation.objects.select_for_update()
        .filter(organization_id=org_id, channel="whatsapp", external_chat_id=chat_id)
        .select_related("contact")
        .order_by("-created_at")
        .first()
    )
    if conversation is None:
        # One door to the contact (crm.services.contact_resolve): the chat's phone, or its lid,
        # matched or claimed in the database, so concurrent first messages make one contact.
        contact, _ = contact_resolve(
            organization_id=org_id,
            whatsapp_chat_id=chat_id,
            name=_push_name(payload),
            source="whatsapp",
        )
        conversation, _opened = conversation_for(
            contact, channel="whatsapp", external_chat_id=chat_id
        )
    contact = conversation.contact
    media = payload.get("media") if isinstance(payload.get("media"), dict) else None
    raw_body = payload.get("body")
    body_text = raw_body if isinstance(raw_body, str) else ""
    message = Message.objects.create(
        organization_id=org_id,
        conversation=conversation,
        direction=Message.Direction.INBOUND,
        status=Message.Status.RECEIVED,
        sender=Message.Sender.CONTACT,
        body=body_text,
        media_urls=[media["url"]] if media and isinstance(media.get("url"), str) else [],
        external_id=waha_id,
    )
    if conversation.last_inbound_at is None or conversation.last_inbound_at < sent_at:
        Conversation.objects.filter(pk=conversation.pk).update(last_inbound_at=sent_at)
    ids = {"conversation_id": str(conversation.pk), "contact_id": str(contact.pk)}
    eventbus.emit(
        "message.received",
        organization=org_id,
        entity_kind="message",
        entity_id=message.pk,
        payload={
            **ids,
            "message_id": str(message.pk),
            "direction": Message.Direction.INBOUND,
            "channel": "whatsapp",
            "waha_message_id": waha_id,
        },
        idempotency_key=f"message.received:{message.pk}",
    )
    keyword = stop_keyword(body_text)
    if keyword and contact.blocked_at is None:
        _block_by_stop(contact, keyword, message)
    start = start_keyword(body_text) if contact.blocked_at is not None else None
    if start:
        opt_in(contact=contact, keyword=start, message_id=message.pk)
    return "stored"


def _block_by_stop(contact: Contact, keyword: str, message: Message) -> None:
    now = timezone.now()
    Contact.objects.filter(pk=contact.pk, blocked_at__isnull=True).update(
        blocked_at=now, blocked_reason="stop_keyword"
    )
    common: dict[str, Any] = {"organization": contact.organization_id, "entity_kind": "contact"}
    eventbus.emit(
        "system.contact_blocked_by_stop",
        **common,
        entity_id=contact.pk,
        payload={"contact_id": str(contact.pk), "keyword": keyword, "message_id": str(message.pk)},
        idempotency_key=f"system.contact_blocked_by_stop:{message.pk}",
    )
    eventbus.emit(
        "contact.blocked",
        **common,
        entity_id=contact.pk,
        payload={"contact_id": str(contact.pk), "reason": "stop_keyword"},
        idempotency_key=f"contact.blocked:stop:{message.pk}",
    )


def ack(session: WahaSession, payload: dict[str, Any]) -> str:
    raw_id = payload.get("id")
    level = payload.get("ack")
    if not isinstance(raw_id, str) or not raw_id or not isinstance(level, int):
        return "ignored"
    if level != ACK_DELIVERED and level not in ACK_READ:
        return "ignored"
    org_id = session.organization_id
    waha_id = normalize_message_id(raw_id)
    key = message_key(waha_id)
    with transaction.atomic():
        lock_key(org_id, key)
        outbound = Message.objects.select_for_update().filter(
            organization_id=org_id, direction=Message.Direction.OUTBOUND
        )
        message = outbound.filter(external_id=waha_id).first()
        if message is None and f"{LID_SERVER}_" in waha_id:  # ours, addressed to the chat's lid
            message = outbound.filter(external_id__endswith=f"_{key}").first()
        if message is None:
            _keep_pending(org_id, key, level)
            return "ack_pending"
        apply_ack(message, level)
    return "ack"


def lock_key(org_id: Any, key: str) -> None:
    """Serialise a receipt and the storing of its message's id (one transaction each), so a
    receipt is either seen by the send or finds the stored id."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"waha-ack:{org_id}:{key}"]
        )


def _keep_pending(org_id: Any, key: str, level: int) -> None:
    """Keep a receipt for a message whose id is not stored yet (the highest level wins)."""
    pending, created = PendingAck.objects.get_or_create(
        organization_id=org_id,
        message_key=key,
        defaults={"ack": level, "received_at": timezone.now()},
    )
    if not created and pending.ack < level:
        PendingAck.objects.filter(pk=pending.pk).update(ack=level)


def apply_pending_acks(message: Message) -> None:
    """Apply (and forget) the receipts that arrived before `message`'s id was stored; runs in
    the transaction that stores the id."""
    lock_key(message.organization_id, message_key(message.external_id))
    pending = PendingAck.objects.filter(
        organization_id=message.organization_id, message_key=message_key(message.external_id)
    )
    levels = list(pending.values_list("ack", flat=True))
    if not levels:
        return
    locked = Message.objects.select_for_update().get(pk=message.pk)
    apply_ack(locked, max(levels))
    pending.delete()


def apply_ack(message: Message, level: int) -> None:
    """Mark a (locked) outbound message delivered, and read for ACK_READ: events once each."""
    now = timezone.now()
    changed: list[str] = []

    def mark(field: str, event_type: str) -> None:
        setattr(message, field, now)
        changed.append(field)
        eventbus.emit(
            event_type,
            organization=message.organization_id,
            entity_kind="message",
            entity_id=message.pk,
            payload={"message_id": str(message.pk), field: now.isoformat()},
            idempotency_key=f"{event_type}:{message.pk}",
        )

    if message.delivered_at is None:
        mark("delivered_at", "message.delivered")
    if level in ACK_READ and message.read_at is None:
        mark("read_at", "message.read")
    if changed:
        progress = [Message.Status.SENDING, Message.Status.SENT, Message.Status.DELIVERED]
        if message.status in progress:
            message.status = Message.Status.READ if message.read_at else Message.Status.DELIVERED
            changed.append("status")
        message.save(update_fields=[*changed, "updated_at"])


def record_status(session: WahaSession, status: str, *, synced: bool = False) -> bool:
    """Store a session's status; emit `system.session_changed` when it changed. Returns whether
    it changed."""
    now = timezone.now()
    with transaction.atomic():
        current = WahaSession.objects.select_for_update().get(pk=session.pk)
        fields: dict[str, Any] = {}
        if synced:
            fields.update(last_sync_at=now, last_sync_error="")
        changed = current.status != status
        if changed:
            fields.update(status=status, status_changed_at=now, alerted_at=None)
            eventbus.emit(
                "system.session_changed",
                organization=current.organization_id,
                entity_kind="waha_session",
                entity_id=current.pk,
                payload={
                    "session_id": str(current.pk),
                    "session": current.name,
                    "from_status": current.status,
                    "to_status": status,
                },
                idempotency_key=(
                    f"system.session_changed:{current.pk}:{current.status}:{status}:{now.isoformat()}"
                ),
            )
        if fields:
            WahaSession.objects.filter(pk=current.pk).update(**fields)
    return changed


def _when(value: object) -> dt.datetime:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        seconds = value / 1000 if value > 10**11 else value  # seconds, or milliseconds
        return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)
    return timezone.now()


def _push_name(payload: dict[str, Any]) -> str:
    data = payload.get("_data")
    if isinstance(data, dict):
        for key in ("notifyName", "pushName"):
            if isinstance(data.get(key), str):
                return str(data[key])[:200]
    return ""
