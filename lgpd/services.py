"""LGPD writes: create a data request, record a consent, generate an export (and e-mail its
single-use link), record a download, expire exports, apply a redaction, run a stuck request by
hand, and the daily SLA check. Each public service is audited.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid

from django.db import transaction
from django.utils import timezone

import eventbus
from core import audit
from core.lgpd_registry import REDACTION_HOOKS, REGISTRY
from crm.models import ConsentRecord, Contact
from lgpd import alerts, archives, exports, mail, selectors, sla, tombstones
from lgpd.models import DataRequest

logger = logging.getLogger(__name__)

AUDIT_TARGET = "lgpd.datarequest"


class UnknownContactError(ValueError):
    """The contact does not exist in the organization (other tenants' contacts included)."""


class DownloadChannel:
    """How an export was downloaded (the audit's `channel`)."""

    ADMIN = "admin"
    API = "api"
    LINK = "link"


def data_request_create(
    *,
    organization_id: uuid.UUID,
    contact_id: uuid.UUID,
    kind: str,
    channel: str,
    actor: str,
) -> DataRequest:
    """Record an access or redact request and emit `lgpd.data_request_received` (same commit)."""
    contact = selectors.contact_get(organization_id=organization_id, contact_id=contact_id)
    if contact is None:
        raise UnknownContactError(f"no contact {contact_id} in this organization")
    with transaction.atomic():
        request = DataRequest.objects.create(
            organization_id=organization_id,
            contact=contact,
            kind=kind,
            channel=channel,
            requested_by=actor,
            received_at=timezone.now(),
        )
        _emit(
            request,
            "lgpd.data_request_received",
            {
                "request_id": str(request.id),
                "request_type": kind,
                "contact_id": str(contact.pk),
                "channel": channel,
            },
        )
        _audit(request, actor=actor, action="lgpd.data_request.create")
    return request


def consent_record(
    *, contact: Contact, consent_type: str, granted: bool, source: str, evidence: str = ""
) -> ConsentRecord:
    """Record a consent change and emit `lgpd.consent_changed` in the same transaction."""
    with transaction.atomic():
        record = ConsentRecord.objects.create(
            organization_id=contact.organization_id,
            contact=contact,
            consent_type=consent_type,
            granted=granted,
            source=source,
            evidence=evidence,
            recorded_at=timezone.now(),
        )
        eventbus.emit(
            "lgpd.consent_changed",
            organization=contact.organization_id,
            entity_kind="contact",
            entity_id=contact.pk,
            payload={
                "contact_id": str(contact.pk),
                "consent_type": consent_type,
                "granted": granted,
                "source": source,
            },
        )
    return record


def export_generate(*, request_id: uuid.UUID, actor: str) -> bool:
    """Build and store the export of an access request, e-mail its link to the data subject and
    announce it (ids and dates only); False if already done."""
    with transaction.atomic():
        request = _locked(request_id)
        if request is None or request.kind != DataRequest.Kind.ACCESS:
            return False
        if request.export_generated_at is not None:
            logger.info("lgpd export of %s already generated; nothing to do", request_id)
            return False
        subject = selectors.subject_for(request.contact)
        request.export_name, request.export_sha256 = exports.store(
            request, exports.bundle(request, subject)
        )
        now = timezone.now()
        request.export_generated_at = now
        request.export_expires_at = exports.link_expiry(now)
        _complete(request, now)
        _audit(request, actor=actor, action="lgpd.export.generate", sha256=request.export_sha256)
        _send_link(request, actor=actor)
        _emit_export_generated(request)
    return True


def export_link_send(*, request_id: uuid.UUID, actor: str) -> bool:
    """E-mail the data subject a new single-use link (the previous one stops working).

    Raises exports.Unavailable when the export cannot be downloaded any more; returns False when
    the contact has no e-mail address (the DPO hands the file over from the admin).
    """
    with transaction.atomic():
        request = _locked(request_id)
        if request is None:
            raise DataRequest.DoesNotExist(f"no data request {request_id}")
        exports.check_available(request)
        return _send_link(request, actor=actor)


def export_link_consume(*, token: str) -> DataRequest:
    """The request whose export a link downloads, marking the link used (it works once).

    Raises exports.InvalidLink for a token no request holds, exports.Unavailable for a used
    link or an export that is gone.
    """
    request = selectors.data_request_for_link(token)
    if request is None:
        raise exports.InvalidLink("not a valid download link")
    exports.check_available(request)
    used = DataRequest.objects.filter(
        pk=request.pk, export_link_hash=request.export_link_hash, export_link_used_at__isnull=True
    ).update(export_link_used_at=timezone.now())
    if not used:
        raise exports.Unavailable("this download link was already used; ask for a new one")
    return request


def export_download_record(*, request: DataRequest, actor: str, channel: str) -> None:
    """Audit one download of an export (every path that serves the file calls it)."""
    _audit(request, actor=actor, action="lgpd.export.download", channel=channel)


def exports_expire(*, now: dt.datetime | None = None) -> int:
    """Delete the export files whose download period ended; returns how many (each audited)."""
    now = now or timezone.now()
    due = list(selectors.exports_expired_by(now))
    for request in due:
        exports.erase(request)
        request.export_deleted_at = now
        request.export_deleted_reason = DataRequest.ExportDeleted.EXPIRED
        request.save(update_fields=["export_deleted_at", "export_deleted_reason"])
        _audit(request, actor="system:lgpd-export-expiry", action="lgpd.export.expire")
    return len(due)


def redaction_apply(*, request_id: uuid.UUID, actor: str) -> bool:
    """Anonymize the subject of a redact request across every category and the event archives;
    False if already done.

    One transaction: either every category is redacted and the events are emitted, or nothing
    changed (a failure is retried by the bus, then dead-lettered to the DPO). Archive files are
    not transactional: a rewritten day stays rewritten if the transaction then fails, and the
    retry finds nothing left to scrub there.
    """
    with transaction.atomic():
        request = _locked(request_id)
        if request is None or request.kind != DataRequest.Kind.REDACT:
            return False
        contact = Contact.objects.select_for_update().get(pk=request.contact_id)
        if contact.anonymized_at is not None:
            _finish_repeat(request)
            return False
        subject = selectors.subject_for(contact)
        # Before the identity is blanked: an import still holding it must not bring it back.
        tombstones.record(contact, request_id=request.id)
        # Seed 000 §6.6: a subject known to another system is redacted there too (each app
        # registers its hook: the shop's queues the call its sync worker makes).
        elsewhere = REDACTION_HOOKS.propagate(contact_id=contact.pk, request_id=request.id)
        changed = {category.name: category.redact(subject) for category in REGISTRY}
        changed["archived_days"] = archives.archives_redact(subject)
        _erase_exports(contact)
        now = timezone.now()
        request.redacted_at = now
        _complete(request, now)
        _emit_redacted(
            request,
            fields=list(contact.PERSONAL_DATA),
            scope=_scope(elsewhere),
        )
        _audit(request, actor=actor, action="lgpd.redact.apply", changed=changed)
    return True


def data_request_run(*, request_id: uuid.UUID, actor: str, reason: str = "") -> bool:
    """Run a request's work now, by hand (the fallback for a stuck request); audited."""
    request = DataRequest.objects.filter(pk=request_id).first()
    if request is None:
        raise DataRequest.DoesNotExist(f"no data request {request_id}")
    audit.record(
        actor=actor,
        action="lgpd.data_request.manual_fallback",
        target_type=AUDIT_TARGET,
        target_id=request.pk,
        organization_id=request.organization_id,
        reason=reason,
        details={"contact_id": str(request.contact_id), "kind": request.kind},
    )
    if request.kind == DataRequest.Kind.ACCESS:
        return export_generate(request_id=request_id, actor=actor)
    return redaction_apply(request_id=request_id, actor=actor)


def sla_check(*, now: dt.datetime | None = None) -> int:
    """Warn once for each request still open past its own due date, and escalate once for each
    access request near the legal deadline (`lgpd.sla.deadlines`); returns how many. A request
    on schedule (a redaction waiting for its D+15 run) raises nothing."""
    now = now or timezone.now()
    escalated = warned = 0
    for kind, levels in sla.deadlines().items():
        if "legal_margin" in levels:
            escalated += _sla_pass(
                now, kind, levels["legal_margin"], "sla_escalated_at", alerts.sla_escalate
            )
        warned += _sla_pass(now, kind, levels["due"], "sla_warned_at", alerts.sla_warn)
    return escalated + warned


def _sla_pass(
    now: dt.datetime, kind: str, after: dt.timedelta, stamp: str, notify: alerts.SlaNotifier
) -> int:
    late = selectors.open_requests_older_than(now - after).filter(kind=kind)
    due = list(late.filter(**{f"{stamp}__isnull": True}))
    for request in due:
        notify(request, now)
    ids = [request.pk for request in due]
    # Escalating also counts as warned: one message per level, never a late warning after it.
    stamps = {stamp: now} if stamp == "sla_warned_at" else {stamp: now, "sla_warned_at": now}
    DataRequest.objects.filter(pk__in=ids, **{f"{stamp}__isnull": True}).update(**stamps)
    return len(ids)


def _locked(request_id: uuid.UUID) -> DataRequest | None:
    return DataRequest.objects.select_for_update().filter(pk=request_id).first()


def _complete(request: DataRequest, now: dt.datetime) -> None:
    request.status = DataRequest.Status.COMPLETED
    request.completed_at = now
    request.save()


def _finish_repeat(request: DataRequest) -> None:
    """The contact was already anonymized (an earlier request): complete this one, emit nothing."""
    if request.status != DataRequest.Status.COMPLETED:
        _complete(request, timezone.now())
    logger.info("lgpd redaction of %s: contact already anonymized; nothing to do", request.pk)


def _erase_exports(contact: Contact) -> None:
    now = timezone.now()
    for earlier in DataRequest.objects.filter(contact=contact, export_deleted_at__isnull=True):
        if exports.erase(earlier):
            earlier.export_deleted_at = now
            earlier.export_deleted_reason = DataRequest.ExportDeleted.REDACTED
            earlier.save(update_fields=["export_deleted_at", "export_deleted_reason"])


def _send_link(request: DataRequest, *, actor: str) -> bool:
    """Replace the request's link with a new one and e-mail it to the contact (same transaction:
    a mail that cannot be sent rolls the work back, and the bus retries it)."""
    address = request.contact.email
    if not address:
        _audit(request, actor=actor, action="lgpd.export.link_not_sent", reason="no e-mail address")
        alerts.email_dpo(
            f"LGPD export {request.pk} ready: the contact has no e-mail address",
            "Download it in the admin (LGPD data requests) and hand it over to the data subject.",
        )
        return False
    token, request.export_link_hash = exports.new_link_token()
    assert request.export_expires_at is not None  # set with the export
    mail.send_export_link(
        to=address, url=exports.link_url(token), expires_at=request.export_expires_at
    )
    request.export_link_sent_at = timezone.now()
    request.export_link_used_at = None
    request.save(update_fields=["export_link_hash", "export_link_sent_at", "export_link_used_at"])
    _audit(request, actor=actor, action="lgpd.export.link_sent", channel="email")
    return True


def _emit_export_generated(request: DataRequest) -> None:
    """v2: ids and dates only. The link is a credential: it goes to the data subject by e-mail,
    never on the bus (every consumer and webhook would receive it)."""
    expires = request.export_expires_at
    _emit(
        request,
        "lgpd.export_generated",
        {
            "request_id": str(request.id),
            "expires_at": expires.isoformat() if expires else None,
            "link_sent": request.export_link_sent_at is not None,
        },
    )


def _scope(elsewhere: list[str]) -> str:
    """The redaction's reach: `crm_only`, or the CRM and the systems whose hook knew the subject
    (`crm_and_nuvemshop`)."""
    return "_and_".join(["crm", *elsewhere]) if elsewhere else "crm_only"


def _emit_redacted(request: DataRequest, *, fields: list[str], scope: str) -> None:
    contact_id = str(request.contact_id)
    _emit(
        request,
        "lgpd.redact_applied",
        {"request_id": str(request.id), "contact_id": contact_id, "scope": scope},
    )
    # Webhook subscribers receive it: LGPD Art. 18 §6, tell those the data was shared with.
    _emit(
        request,
        "contact.anonymized",
        {"lgpd_request_id": str(request.id), "anonymized_fields": fields},
    )


def _emit(request: DataRequest, event_type: str, payload: dict[str, object]) -> None:
    """Every LGPD event is about the contact (entity) and carries ids only, never personal data."""
    eventbus.emit(
        event_type,
        organization=request.organization_id,
        entity_kind="contact",
        entity_id=request.contact_id,
        payload=payload,
    )


def _audit(
    request: DataRequest, *, actor: str, action: str, reason: str = "", **details: object
) -> None:
    audit.record(
        actor=actor,
        action=action,
        target_type=AUDIT_TARGET,
        target_id=request.pk,
        organization_id=request.organization_id,
        reason=reason,
        details={"contact_id": str(request.contact_id), "kind": request.kind, **details},
    )
