"""A handler acts only inside its delivery's organization: the second line of that defence.

The first is row-level security: the drain runs every handler with its connection scoped to the
delivery's organization (eventbus.dispatch.drain.run_job), so another tenant's row is simply not
there. The second is explicit, in every integration handler that takes an id from its payload:
`guard_payload(event, {"field": Model})` (or `guard_ids` for ids found elsewhere) passes when
every id names a row of the event's organization or no row at all, and raises
`CrossTenantRefused` (a PermanentError: the delivery is dead-lettered at once, never retried)
when one names another organization's row.
The drain records each refusal in the event's organization's audit log as
`security.cross_tenant_refused` (after the handler's own transaction is rolled back, so the row
survives an atomic consumer), naming the event, the consumer and the model, never the other
tenant.

Telling "another tenant's" from "none" needs one look past the wall: a savepoint that turns the
bypass on for itself alone and is rolled back (the setting goes with it), run only on the
refusal path, by a worker (the web role cannot lift the wall at all).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import connection, models, transaction

from core import audit
from eventbus.store.errors import PermanentError

ACTION = "security.cross_tenant_refused"


class SecurityRefusal(PermanentError):
    """A handler refused an event for security (dead-lettered at once); the drain audits it in
    the event's organization as `action` once the handler's transaction is rolled back."""

    action = "security.refused"

    def __init__(self, message: str, *, event: Any, target_type: str, target_id: object) -> None:
        super().__init__(f"{message}: refused ({self.action})")
        self.target_type = target_type
        self.target_id = str(target_id)
        self.event_id = str(event.id)
        self.event_type = str(event.event_type)
        self.organization_id: uuid.UUID = event.organization_id
        self.consumer = str(getattr(event, "consumer", "") or "")

    def record(self) -> None:
        """The audit row, in the event's organization."""
        audit.record(
            actor=audit.system_actor(self.consumer or "eventbus"),
            action=self.action,
            target_type=self.target_type,
            target_id=self.target_id,
            organization_id=self.organization_id,
            reason=str(self),
            details={
                "event_id": self.event_id,
                "event_type": self.event_type,
                "consumer": self.consumer,
            },
        )


class CrossTenantRefused(SecurityRefusal):
    """A payload named a row of another organization than its event's: refused, audited."""

    action = ACTION

    def __init__(self, *, model: type[models.Model], pk: object, event: Any) -> None:
        label = model._meta.label
        super().__init__(
            f"{label} {pk}, named by the payload of {event.event_type} {event.id}, does not "
            "belong to the event's organization",
            event=event,
            target_type=label,
            target_id=pk,
        )


class ProvenanceRefused(SecurityRefusal):
    """An event that only one producer may send came from another: refused, audited."""

    action = "security.provenance_refused"

    def __init__(self, *, event: Any, expected: str) -> None:
        found = (event.metadata.get("provenance") or {}) if event.metadata else {}
        producer = f"{found.get('producer', 'unknown')} ({found.get('component', '')})"
        super().__init__(
            f"{event.event_type} {event.id} is accepted only from {expected}, not from {producer}",
            event=event,
            target_type="eventbus.EventLog",
            target_id=event.id,
        )


def require_producer(event: Any, *, producer: str, component: str) -> None:
    """Refuse (ProvenanceRefused) an event the bus did not record as produced by `producer`'s
    `component` (through the app door: never an integrator's or a pipeline's)."""
    found = event.metadata.get("provenance") or {}
    if (found.get("door"), found.get("producer"), found.get("component")) != (
        "app",
        producer,
        component,
    ):
        raise ProvenanceRefused(event=event, expected=f"{producer} ({component})")


class _Looked(Exception):
    def __init__(self, found: uuid.UUID | None) -> None:
        self.found = found


def organization_of(model: type[models.Model], pk: object) -> uuid.UUID | None:
    """The organization of `model`'s row `pk`, whoever's it is (None: no such row)."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('app.rls_bypass', 'on', true)")
            found = (
                model._base_manager.filter(pk=pk).values_list("organization_id", flat=True).first()
            )
            raise _Looked(found)  # rolls the savepoint back, and the bypass with it
    except _Looked as looked:
        return looked.found


def refuse_if_foreign(model: type[models.Model], pk: object, event: Any) -> None:
    """Raise CrossTenantRefused when `model`'s row `pk` exists in another organization."""
    try:
        owner = organization_of(model, pk)
    except (ValueError, TypeError, ValidationError):
        return  # not an id of this model at all (a malformed payload): no row
    if owner is not None and owner != event.organization_id:
        raise CrossTenantRefused(model=model, pk=pk, event=event)


def guard_ids(event: Any, named: Iterable[tuple[type[models.Model], object]]) -> None:
    """Refuse (CrossTenantRefused) the event when any (model, id) it names is a row of another
    organization. One indexed probe per id in the event's organization; a look past the wall
    only for an id not found there. Ids that are empty or not ids of the model are skipped
    (no such row: the handler decides what that means)."""
    for model, pk in named:
        if pk in (None, "", "None"):
            continue
        try:
            mine = model._base_manager.filter(pk=pk, organization_id=event.organization_id)
            if mine.exists():
                continue
        except (ValueError, TypeError, ValidationError):
            continue
        refuse_if_foreign(model, pk, event)


def guard_payload(event: Any, fields: Mapping[str, type[models.Model]]) -> None:
    """`guard_ids` for the payload fields named in `fields` (field -> model)."""
    payload = event.payload
    guard_ids(event, ((model, payload.get(field)) for field, model in fields.items()))
