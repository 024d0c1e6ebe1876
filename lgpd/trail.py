"""The audit-trail extraction for a data subject (seed 001 §11.6): CSV + SHA-256, audited."""

from __future__ import annotations

import csv
import hashlib
import io
import uuid
from pathlib import Path

from core import audit
from crm.models import Contact
from lgpd import selectors

HEADER = ("source", "created_at", "actor", "action", "target_type", "target_id", "request_id")


class UnknownContact(LookupError):
    """No contact with that id."""


def write_csv(*, contact_id: uuid.UUID, path: Path, actor: str) -> tuple[int, str]:
    """Write the subject's operations to `path`; returns (rows, SHA-256 of the file)."""
    contact = Contact.objects.filter(pk=contact_id).first()
    if contact is None:
        raise UnknownContact(f"no contact {contact_id}")
    rows = selectors.audit_trail(contact)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    content = buffer.getvalue().encode()
    path.write_bytes(content)
    digest = hashlib.sha256(content).hexdigest()
    audit.record(
        actor=actor,
        action="lgpd.audit_extraction",
        target_type="deskcomm.contact",
        target_id=contact.pk,
        organization_id=contact.organization_id,
        details={"rows": len(rows), "sha256": digest},
    )
    return len(rows), digest
