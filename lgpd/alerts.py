"""Tell the DPO: dead LGPD work (R-L3) and SLA breaches (R-L4), by e-mail and the bus alerts."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence

from django.core.mail import send_mail

from core.alerts import alert
from eventbus.dispatch.claim import DeadDelivery
from lgpd.conf import lgpd_settings
from lgpd.models import DataRequest

logger = logging.getLogger(__name__)

LGPD_CONSUMERS = ("lgpd-export-worker", "lgpd-redact-worker")
SlaNotifier = Callable[[DataRequest, dt.datetime], None]


def dead_letter_hook(dead: Sequence[DeadDelivery]) -> None:
    """EVENTBUS dead-letter hook: a dead LGPD delivery is a compliance issue for the DPO."""
    for letter in dead:
        if letter.consumer not in LGPD_CONSUMERS:
            continue
        subject = f"LGPD {letter.consumer} dead after {letter.attempts} attempt(s)"
        body = (
            f"Delivery {letter.delivery_id} of event {letter.event_id} (organization "
            f"{letter.organization_id}) is in the dead-letter queue: {letter.error}\n"
            "Fix the cause, then reprocess it or run `manage.py lgpd_run REQUEST_ID`."
        )
        alert(subject, delivery_id=letter.delivery_id, event_id=str(letter.event_id))
        email_dpo(subject, body)


def sla_warn(request: DataRequest, now: dt.datetime) -> None:
    _sla("warning", request, now)


def sla_escalate(request: DataRequest, now: dt.datetime) -> None:
    _sla("ESCALATION", request, now)
    alert("LGPD data request overdue", request_id=str(request.pk), kind=request.kind)


def _sla(level: str, request: DataRequest, now: dt.datetime) -> None:
    age = (now - request.received_at).days
    subject = f"LGPD SLA {level}: {request.kind} request {request.pk} open for {age} day(s)"
    logger.warning(subject, extra={"organization_id": str(request.organization_id)})
    email_dpo(subject, f"{subject}. Received at {request.received_at.isoformat()}.")


def email_dpo(subject: str, body: str) -> None:
    """E-mail LGPD_DPO_EMAIL (logged, never raised, when unset or failing)."""
    recipient = lgpd_settings.DPO_EMAIL
    if not recipient:
        logger.error("LGPD_DPO_EMAIL is not set; DPO not e-mailed: %s", subject)
        return
    try:
        send_mail(f"[deskcomm] {subject}", body, None, [recipient])
    except Exception:
        logger.exception("could not e-mail the DPO: %s", subject)
