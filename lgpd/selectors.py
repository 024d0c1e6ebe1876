"""LGPD reads: the subject of a request, data requests for the API, the audit trail."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

from django.db.models import Min, Q, QuerySet

from core import audit_archive
from core.lgpd_subject import Subject
from core.models import AuditLog
from crm.models import ConsentRecord, Contact, Conversation, Lead, Message
from crm.personal_data import subject_orders
from eventbus.store.models import EventLog
from lgpd import exports
from lgpd.models import DataRequest


def subject_for(contact: Contact) -> Subject:
    """The contact as a data subject, with the ids of every record of theirs."""
    subject = Subject.of(contact)
    subject.entity_ids = set(subject_entity_ids(contact))
    return subject


def subject_entity_ids(contact: Contact) -> list[uuid.UUID]:
    """Ids of the contact and of its records: what events and audit rows about them point at."""
    ids: list[uuid.UUID] = [contact.pk]
    ids += Conversation.objects.filter(contact=contact).values_list("pk", flat=True)
    ids += Message.objects.filter(conversation__contact=contact).values_list("pk", flat=True)
    ids += Lead.objects.filter(contact=contact).values_list("pk", flat=True)
    ids += subject_orders(contact).values_list("pk", flat=True)
    ids += DataRequest.objects.filter(contact=contact).values_list("pk", flat=True)
    return ids


def contact_get(*, organization_id: uuid.UUID, contact_id: uuid.UUID) -> Contact | None:
    return Contact.objects.filter(organization_id=organization_id, pk=contact_id).first()


def consents_of(contact: Contact) -> list[ConsentRecord]:
    """The contact's consent records, newest first (the first of a type is the one in force)."""
    return list(contact.consents.order_by("-recorded_at", "-id"))


def data_request_get(*, organization_id: uuid.UUID, request_id: uuid.UUID) -> DataRequest | None:
    return DataRequest.objects.filter(organization_id=organization_id, pk=request_id).first()


def data_requests_page(
    *,
    organization_id: uuid.UUID,
    before: tuple[dt.datetime, uuid.UUID] | None,
    limit: int,
    contact_id: uuid.UUID | None = None,
) -> list[DataRequest]:
    """Up to `limit` requests of the organization, newest first, older than `before`."""
    rows: QuerySet[DataRequest] = DataRequest.objects.filter(organization_id=organization_id)
    if contact_id is not None:
        rows = rows.filter(contact_id=contact_id)
    if before is not None:
        stamp, ident = before
        rows = rows.filter(Q(received_at__lt=stamp) | Q(received_at=stamp, id__lt=ident))
    return list(rows.order_by("-received_at", "-id")[:limit])


def data_request_for_link(token: str) -> DataRequest | None:
    """The request whose current e-mailed link is `token` (lgpd_request_link_idx), or None."""
    if not token:
        return None
    return DataRequest.objects.filter(export_link_hash=exports.token_hash(token)).first()


def exports_expired_by(now: dt.datetime) -> QuerySet[DataRequest]:
    """Exports still stored whose download period ended by `now` (lgpd_request_export_live_idx)."""
    return (
        DataRequest.objects.filter(export_deleted_at__isnull=True, export_expires_at__lte=now)
        .exclude(export_name="")
        .order_by("export_expires_at")
    )


def open_requests_older_than(cutoff: dt.datetime) -> QuerySet[DataRequest]:
    """Requests not done yet that were received before `cutoff` (the SLA check)."""
    return DataRequest.objects.filter(
        status=DataRequest.Status.RECEIVED, received_at__lte=cutoff
    ).order_by("received_at")


def oldest_open_request_received_at(kind: str) -> dt.datetime | None:
    """When the oldest request of `kind` still open was received (None: none is open)."""
    oldest: dt.datetime | None = (
        DataRequest.objects.filter(status=DataRequest.Status.RECEIVED, kind=kind)
        .order_by("received_at")
        .values_list("received_at", flat=True)
        .first()
    )
    return oldest


def oldest_open_requests_by_organization() -> list[tuple[str, str, dt.datetime]]:
    """(organization slug, kind, oldest received_at) for every organization with open requests."""
    rows = (
        DataRequest.objects.filter(status=DataRequest.Status.RECEIVED)
        .values_list("organization__slug", "kind")
        .annotate(oldest=Min("received_at"))
        .order_by()
    )
    return [(slug, kind, oldest) for slug, kind, oldest in rows]


ARCHIVED_FIELDS = ("actor", "action", "target_type", "target_id", "request_id")


def _about(row: dict[str, Any], entity_ids: list[str], contact_id: str) -> bool:
    details = row.get("details") or {}
    return row["target_id"] in entity_ids or details.get("contact_id") == contact_id


def audit_trail(contact: Contact) -> list[tuple[str, ...]]:
    """Every recorded operation on the subject, oldest first: audit rows, then bus events.

    One row per operation: (source, created_at, actor, action, target_type, target_id,
    request_id). No personal data: only ids, names of operations and times.
    """
    ids = [str(ident) for ident in subject_entity_ids(contact)]
    audits = AuditLog.objects.filter(
        Q(target_id__in=ids) | Q(details__contact_id=str(contact.pk))
    ).values_list("id", "created_at", "actor", "action", "target_type", "target_id", "request_id")
    hot = {row[0]: row[1:] for row in audits}
    # Rows past the hot window live in the audit archives (core.audit_archive).
    for row in audit_archive.archived_rows([contact.organization_id]):
        if row["id"] not in hot and _about(row, ids, str(contact.pk)):
            hot[row["id"]] = (
                dt.datetime.fromisoformat(row["created_at"]),
                *(row[key] for key in ARCHIVED_FIELDS),
            )
    events = EventLog.objects.filter(
        organization_id=contact.organization_id, entity_id__in=ids
    ).values_list("created_at", "metadata", "event_type", "entity_kind", "entity_id")
    rows = [("audit", *(str(v) for v in row)) for row in hot.values()]
    rows += [
        (
            "event",
            str(created),
            str(meta.get("actor_id", "")),
            event_type,
            kind,
            str(entity),
            str(meta.get("request_id", "")),
        )
        for created, meta, event_type, kind, entity in events
    ]
    return sorted(rows, key=lambda row: row[1])
