"""Re-encrypt every stored token of an encryption context under its current key, in batches.

The rotation procedure (docs/runbooks/key-rotation.md): put the new key first in the context's
variable and keep the old one after it (every process then reads both: dual-read), run
`rotate_encryption_key --context NAME`, and remove the old key once it reports nothing left.
Batches are keyset-paginated by primary key and locked while rewritten, so the command can run
while the application writes, be interrupted, and be run again (current tokens are skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from django.apps import apps
from django.db import models, transaction
from django.db.models import Q, QuerySet

from core import audit, crypto


@dataclass
class RotationReport:
    """What a rotation did: tokens rewritten, already current, and still unreadable by the key."""

    rewritten: int = 0
    already_current: int = 0
    remaining: int = 0


def encryption_key_rotate(
    *,
    context: str,
    actor: str,
    batch_size: int = 500,
    progress: Callable[[str], None] = lambda _: None,
) -> RotationReport:
    """Re-encrypt the context's declared fields under its current key, verify, and audit it
    (`secret.rotated`: who, when, the context and the counts)."""
    report = RotationReport()
    fields = crypto.encrypted_fields(context)
    for label, field in fields:
        model = apps.get_model(label)
        last_pk = None
        while (batch := _next_batch(model, field, last_pk, batch_size)) is not None:
            last_pk = _rotate_batch(model, field, context, batch, report)
            progress(f"{label}.{field}: up to pk {last_pk}")
        report.remaining += _count_not_current(model, field, context)
    audit.record(
        actor=actor,
        action="secret.rotated",
        target_type="deskcomm.encryption_context",
        target_id=context,
        details={**asdict(report), "fields": [f"{label}.{name}" for label, name in fields]},
    )
    return report


def _stored(model: type[models.Model], field: str) -> QuerySet[models.Model]:
    """The rows that hold a token in `field` (NULL and "" mean no value, nothing to rotate)."""
    return model._default_manager.exclude(Q(**{f"{field}__isnull": True}) | Q(**{field: ""}))


def _next_batch(
    model: type[models.Model], field: str, after: object, size: int
) -> list[object] | None:
    rows = _stored(model, field).order_by("pk")
    if after is not None:
        rows = rows.filter(pk__gt=after)
    pks = list(rows.values_list("pk", flat=True)[:size])
    return pks or None


def _rotate_batch(
    model: type[models.Model], field: str, context: str, pks: list[object], report: RotationReport
) -> object:
    with transaction.atomic():
        # Locked so a concurrent write (e.g. a secret rotation) is not overwritten by an old value.
        rows = model._default_manager.select_for_update().filter(pk__in=pks).order_by("pk")
        changed = []
        for row in rows.only("pk", field):
            token = getattr(row, field)
            if crypto.is_current(context, token):
                report.already_current += 1
                continue
            try:
                setattr(row, field, crypto.reencrypt(context, token))
            except crypto.DecryptionError:
                continue  # no configured key reads it: counted in `remaining` by the verification
            changed.append(row)
        model._default_manager.bulk_update(changed, [field])
        report.rewritten += len(changed)
    return pks[-1]


def _count_not_current(model: type[models.Model], field: str, context: str) -> int:
    tokens = _stored(model, field).values_list(field, flat=True)
    return sum(1 for token in tokens.iterator() if not crypto.is_current(context, token))
