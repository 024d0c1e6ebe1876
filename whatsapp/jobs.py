"""The WhatsApp app's scheduled jobs (seed 001 §11.1-11.2; `POST /api/v1/cron/<name>` too)."""

from __future__ import annotations

import datetime as dt
import logging

from django.db import transaction
from django.utils import timezone

import eventbus
from core.alerts import alert
from crm.conf import crm_settings
from crm.identity import chat_phone
from crm.models import Contact, Conversation, Message
from crm.services import contact_identity_add, emit_message_queued
from eventbus.store.models import Delivery
from jobs.registry import integration_check, job
from whatsapp import client as waha
from whatsapp.conf import SEND_CONSUMER, whatsapp_settings
from whatsapp.inbound import LID_SERVER, record_status
from whatsapp.models import PendingAck, WahaSession
from whatsapp.sending import fail_message

# Seed 001 A3 (FAILED), A4 (STARTING for more than ALERT_AFTER_SECONDS), and a QR code nobody
# scans.
ALERT_STATUSES = (
    WahaSession.Status.FAILED,
    WahaSession.Status.SCAN_QR_CODE,
    WahaSession.Status.STARTING,
)
logger = logging.getLogger(__name__)
# A missed run of expire-24h-windows is caught up by the next ones within this much.
WINDOW_CATCH_UP = dt.timedelta(hours=6)


@integration_check("whatsapp")
@job("sync-sessions", every=dt.timedelta(minutes=1))
def sync_sessions() -> int:
    """Compare WAHA's GET /api/sessions with our sessions: store each status, emit
    `system.session_changed` on a change, alert on one stuck FAILED, SCAN_QR_CODE or STARTING;
    resolve `@lid` senders; forget old receipts kept for no stored message."""
    by_server: dict[tuple[str, str], list[WahaSession]] = {}
    for session in WahaSession.objects.order_by("name"):
        by_server.setdefault((session.effective_base_url, session.api_key), []).append(session)
    synced = 0
    with waha.waha_client() as http:
        for (base_url, api_key), group in by_server.items():
            try:
                listed = {
                    str(s.get("name")): str(s.get("status"))
                    for s in waha.sessions(http, base_url, api_key)
                }
            except waha.WahaError as exc:
                WahaSession.objects.filter(pk__in=[s.pk for s in group]).update(
                    last_sync_error=str(exc)[:2000]
                )
                continue
            for session in group:
                status = listed.get(session.name, WahaSession.Status.MISSING)
                if status not in WahaSession.Status.values:
                    status = WahaSession.Status.UNKNOWN
                record_status(session, status, synced=True)
                synced += 1
            for session in group:
                if listed.get(session.name) == WahaSession.Status.WORKING:
                    resolve_lids(http, session)
    _alert_stuck_sessions()
    _forget_old_receipts()
    return synced


def resolve_lids(http: object, session: WahaSession) -> int:
    """Give the contacts who wrote from a privacy id (`<n>@lid`, stored without a phone) the
    number WAHA knows for it; an unknown lid is asked again at the next run."""
    import httpx

    assert isinstance(http, httpx.Client)
    target = waha.Target(session.effective_base_url, session.name, session.api_key)
    pending = Conversation.objects.filter(
        organization_id=session.organization_id,
        channel="whatsapp",
        external_chat_id__endswith=LID_SERVER,
        contact__phone="",
    ).values_list("contact_id", "external_chat_id")[: whatsapp_settings.LIDS_PER_RUN]
    resolved = 0
    for contact_id, lid in pending:
        try:
            chat_id = waha.lid_phone(http, target, lid)
        except waha.WahaError as exc:
            logger.warning("lid of contact %s not resolved: %s", contact_id, exc.code)
            break
        phone = chat_phone(chat_id) if chat_id else ""
        if phone:
            with transaction.atomic():
                contact = Contact.objects.select_for_update().get(pk=contact_id)
                contact_identity_add(contact, phone=phone)  # its phone key, unless another holds it
                resolved += Contact.objects.filter(pk=contact_id, phone="").update(phone=phone)
    return resolved


def _forget_old_receipts() -> None:
    """Receipts kept for a message id never stored (not ours, or the send failed)."""
    limit = timezone.now() - dt.timedelta(days=whatsapp_settings.PENDING_ACK_DAYS)
    PendingAck.objects.filter(received_at__lt=limit).delete()


def _alert_stuck_sessions() -> None:
    limit = timezone.now() - dt.timedelta(seconds=whatsapp_settings.ALERT_AFTER_SECONDS)
    stuck = WahaSession.objects.filter(
        status__in=ALERT_STATUSES, status_changed_at__lte=limit, alerted_at__isnull=True
    )
    for session in stuck:
        alert(
            f"WhatsApp session {session.name} is {session.status}",
            session=session.name,
            status=session.status,
            organization_id=str(session.organization_id),
            since=session.status_changed_at.isoformat() if session.status_changed_at else "",
        )
        WahaSession.objects.filter(pk=session.pk).update(alerted_at=timezone.now())


@job("recover-stuck-messages", every=dt.timedelta(minutes=1))
def recover_stuck_messages() -> int:
    """Messages still `sending` after WAHA_STUCK_AFTER_SECONDS with no live send delivery:
    queued again (the worker checks WAHA before resending) or failed when out of attempts."""
    limit = timezone.now() - dt.timedelta(seconds=whatsapp_settings.STUCK_AFTER_SECONDS)
    stuck = list(
        Message.objects.filter(
            status=Message.Status.SENDING, updated_at__lte=limit, external_id=""
        ).select_related("conversation")[:500]
    )
    if not stuck:
        return 0
    live = set(
        Delivery.objects.filter(
            consumer=SEND_CONSUMER,
            status__in=["pending", "processing"],
            event__entity_id__in=[m.pk for m in stuck],
        ).values_list("event__entity_id", flat=True)
    )
    handled = 0
    for message in stuck:
        if message.pk in live:
            continue  # the bus still retries it
        if message.attempts >= whatsapp_settings.SEND_ATTEMPTS:
            fail_message(message, "stuck", "still sending after every attempt", retryable=True)
        else:
            emit_message_queued(
                message, idempotency_key=f"message.queued:{message.pk}:recover:{message.attempts}"
            )
        handled += 1
    return handled


@job("expire-24h-windows", every=dt.timedelta(minutes=5))
def expire_24h_windows() -> int:
    """Emit `system.window_24h_expired` once per conversation whose customer window closed
    (24 h after its last inbound message) since the last runs."""
    now = timezone.now()
    window = dt.timedelta(hours=crm_settings.WINDOW_HOURS)
    closed = Conversation.objects.filter(
        channel="whatsapp",
        last_inbound_at__lte=now - window,
        last_inbound_at__gt=now - window - WINDOW_CATCH_UP,
    ).order_by("last_inbound_at")[:5000]
    emitted = 0
    for conversation in closed:
        assert conversation.last_inbound_at is not None
        expired_at = conversation.last_inbound_at + window
        eventbus.emit(
            "system.window_24h_expired",
            organization=conversation.organization_id,
            entity_kind="conversation",
            entity_id=conversation.pk,
            payload={
                "conversation_id": str(conversation.pk),
                "contact_id": str(conversation.contact_id),
                "expired_at": expired_at.isoformat(),
            },
            idempotency_key=(
                f"system.window_24h_expired:{conversation.pk}:{conversation.last_inbound_at.isoformat()}"
            ),
        )
        emitted += 1
    return emitted
