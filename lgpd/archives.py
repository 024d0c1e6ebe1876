"""The redaction reaches the event archives: every archived record about the subject, or that
mentions them, is scrubbed like its hot rows (the same fields as the event and webhook
categories, named in eventbus.personal_data), and the day's file is rewritten
(eventbus.history.archive_rewrite), so no restore can bring the subject's data back."""

from __future__ import annotations

import json
import uuid
from typing import Any

from core.lgpd_registry import scrubbed
from core.lgpd_subject import Subject
from eventbus.history.archive_rewrite import rewrite_organization
from eventbus.personal_data import DELIVERY_ATTEMPT_FIELDS, DELIVERY_FIELDS, EventCategory
from eventbus.store.models import EventLog

EVENT_FIELDS = EventCategory.covers[EventLog]


def archives_redact(subject: Subject) -> int:
    """Scrub the subject from the organization's archived days; returns days rewritten."""
    return rewrite_organization(
        subject.contact.organization_id, lambda record: _scrub(record, subject)
    )


def _scrub(record: dict[str, Any], subject: Subject) -> bool:
    event = record["event"]
    about = event.get("entity_id") and uuid.UUID(event["entity_id"]) in subject.entity_ids
    if not about and not subject.mentions(json.dumps(record, ensure_ascii=False)):
        return False
    changed = _scrub_fields(event, EVENT_FIELDS, subject)
    for delivery in record["deliveries"]:
        changed |= _scrub_fields(delivery, DELIVERY_FIELDS, subject)
        for attempt in delivery.get("attempt_log", []):
            changed |= _scrub_fields(attempt, DELIVERY_ATTEMPT_FIELDS, subject)
    return changed


def _scrub_fields(row: dict[str, Any], fields: tuple[str, ...], subject: Subject) -> bool:
    changed = False
    for name in fields:
        value = row.get(name)
        if value is None:
            continue
        clean = scrubbed(value, subject)
        if clean != value:
            row[name] = clean
            changed = True
    return changed
