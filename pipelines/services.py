"""Pipeline writes (validated, audited) and seed 004's order flow.

- `pipeline_create` / `pipeline_update`: the definition is validated on save
  (`DefinitionError` names the node of each problem); one enabled pipeline per trigger. The
  text the author wrote is kept as written (`definition_source`, secret values masked; an API
  body's key order re-indented): jsonb sorts keys. `unlisted_hosts` lists the http-request
  nodes whose literal host the organization's allowlist does not name (the admin refuses them).
- `order_create`: runs the organization's enabled `order.pre` pipeline in the request, then
  writes the order, its fat `order.confirmed` and every event order.pre's emit-event nodes
  collected (each with `causation_id` = the order.confirmed id), plus the order.pre execution,
  in one transaction. A failed order.pre raises `PreFailed` and writes nothing.
- `execution_rerun`: run a FAILED execution's pipeline again over its trigger event; a success
  takes the dead delivery it stands in for out of the DLQ (discarded, audited).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

import eventbus
from core import audit
from core.models import Organization
from crm.models import Order
from crm.services import order_confirm
from eventbus.operations import services as bus
from eventbus.store.models import Delivery, DeliveryStatus, EventLog
from eventbus.store.provenance import Provenance
from pipelines import engine, secrets, selectors
from pipelines.context import amount, event_context, order_context
from pipelines.definition import (
    EVENT_PREFIX,
    EVENT_WORKER,
    TRIGGER_ORDER_POST,
    TRIGGER_ORDER_PRE,
    DefinitionError,
    Problem,
    parse,
    validate_trigger,
)
from pipelines.models import Execution, Pipeline

# Serialises order_create per (organization, number) until the transaction ends.
ORDER_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('pipelines.order'), hashtext(%s))"


class InvalidTrigger(ValueError):
    """The trigger is not order.pre, order.post or a consumed event.<type>."""


class PipelineConflict(ValueError):
    """Another pipeline of the organization is enabled on the same trigger."""


class OrderExists(ValueError):
    """An order with this number is already confirmed."""


class PreFailed(Exception):
    """The order.pre pipeline failed: nothing was written."""

    def __init__(self, execution: Execution) -> None:
        self.execution = execution
        self.node = execution.failed_node
        super().__init__(execution.error)


def check_trigger(trigger: object) -> str:
    """`validate_trigger`, plus: an event.<type> trigger needs pipeline-event-worker subscribed.
    Raises InvalidTrigger."""
    try:
        found = validate_trigger(trigger)
    except ValueError as exc:
        raise InvalidTrigger(str(exc)) from None
    if found.startswith(EVENT_PREFIX):
        event_type = found[len(EVENT_PREFIX) :]
        if EVENT_WORKER not in {c.name for c in eventbus.registry.for_event(event_type)}:
            raise InvalidTrigger(
                f"{EVENT_WORKER} does not consume {event_type}: add it to PIPELINES_EVENT_TYPES "
                "(and restart the workers) so its pipelines run"
            )
    return found


def pipeline_create(
    *,
    organization: Organization | uuid.UUID,
    name: str,
    trigger: str,
    definition: Mapping[str, Any],
    enabled: bool = True,
    actor: str,
    definition_source: str | None = None,
) -> Pipeline:
    """`definition_source`: the definition's JSON text as its author wrote it (the admin's
    editor), kept as written; None: the definition's own key order, indented."""
    org_id = organization.pk if isinstance(organization, Organization) else organization
    trigger = check_trigger(trigger)
    pipeline = Pipeline(organization_id=org_id, name=name, trigger=trigger, enabled=enabled)
    _set_definition(pipeline, definition, definition_source)
    _save(pipeline, force_insert=True)
    _audit(pipeline, actor, "pipeline.create")
    return pipeline


def pipeline_update(pipeline: Pipeline, *, actor: str, **changes: Any) -> Pipeline:
    """Change name, trigger, definition (with `definition_source`, its text as written) and/or
    enabled; the result is validated as a whole."""
    unknown = set(changes) - {"name", "trigger", "definition", "enabled", "definition_source"}
    if unknown:
        raise ValueError(f"unknown field(s) {sorted(unknown)}")
    if "trigger" in changes:
        changes["trigger"] = check_trigger(changes["trigger"])
    source = changes.pop("definition_source", None)
    if "definition" in changes:
        _set_definition(pipeline, changes.pop("definition"), source)
        changes_names = [*changes, "definition"]
    else:
        changes_names = list(changes)
    for name, value in changes.items():
        setattr(pipeline, name, value)
    _save(pipeline)
    _audit(pipeline, actor, "pipeline.update", details={"changed": sorted(changes_names)})
    return pipeline


def _set_definition(
    pipeline: Pipeline, definition: Mapping[str, Any], source: str | None = None
) -> None:
    """Validate `definition` (its masked secret headers keep their stored values) and set it on
    `pipeline` with its secret header values moved to the encrypted column (pipelines.secrets),
    and its text: `source` as written (secret values masked), else the definition indented."""
    stored = pipeline.secret_headers() if pipeline.secret_headers_encrypted else {}
    try:
        full = secrets.restore(definition, stored)
    except secrets.MaskedWithoutSecret as exc:
        raise DefinitionError([Problem(exc.node, str(exc))]) from None
    parse(full)
    pipeline.definition, found = secrets.split(full)
    pipeline.secret_headers_encrypted = secrets.seal(found)
    written = secrets.mask_source(source, found, pipeline.definition) if source else None
    pipeline.definition_source = written or definition_text(pipeline.definition)


def definition_text(definition: Any) -> str:
    """A definition as JSON text in its own key order, two-space indented (what the editor
    shows when no text was written for it)."""
    return json.dumps(definition, indent=2, ensure_ascii=False)


def unlisted_hosts(organization_id: uuid.UUID, definition: Any) -> list[Problem]:
    """The http-request nodes whose URL names a host (literally: a templated host is only known
    at run time) that the organization's allowlist does not name: every run would fail there."""
    nodes = definition.get("nodes") if isinstance(definition, Mapping) else None
    problems = []
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, Mapping) or node.get("type") != "http-request":
            continue
        config = node.get("config")
        host = literal_host(config.get("url") if isinstance(config, Mapping) else None)
        if host and not engine.host_allowed(organization_id, host):
            problems.append(
                Problem(
                    str(node.get("id")),
                    f"host {host!r} is not on this organization's pipeline host allowlist "
                    "(Pipelines > Allowed hosts): add it first, or every run fails at this step",
                )
            )
    return problems


def literal_host(url: object) -> str | None:
    """The host of `url` when it is written out (no template in it), lower case; else None."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
    except ValueError:
        return None
    if not host or "{" in parts.netloc or "%" in parts.netloc:
        return None
    return host


def _save(pipeline: Pipeline, **kwargs: Any) -> None:
    try:
        with transaction.atomic():
            pipeline.save(**kwargs)
    except IntegrityError:
        raise PipelineConflict(
            f"another enabled pipeline of this organization runs on {pipeline.trigger}: "
            "disable it first"
        ) from None


def _audit(
    pipeline: Pipeline, actor: str, action: str, details: dict[str, Any] | None = None
) -> None:
    audit.record(
        actor=actor,
        action=action,
        target_type="pipelines.pipeline",
        target_id=pipeline.pk,
        organization_id=pipeline.organization_id,
        details={"trigger": pipeline.trigger, "enabled": pipeline.enabled, **(details or {})},
    )


def order_create(
    *,
    organization: Organization,
    number: str,
    total_cents: int,
    currency: str = "BRL",
    items: Sequence[Mapping[str, Any]] = (),
    fields: Mapping[str, Any] | None = None,
) -> tuple[Order, Execution | None]:
    """Seed 004's `POST /orders`: order.pre in the request, then one transaction (see module)."""
    number = number.strip()
    _refuse_confirmed(organization, number)
    pipeline = selectors.enabled_pipeline(organization.pk, TRIGGER_ORDER_PRE)
    outcome = None
    if pipeline is not None:
        summary = {
            "number": number,
            "total_cents": total_cents,
            "total_amount": amount(total_cents),
            "currency": currency,
            "items": [dict(i) for i in items],
        }
        outcome = engine.run(pipeline, context=order_context(summary), collect=True)
        if outcome.failed:
            raise PreFailed(outcome.execution)
    with transaction.atomic():
        # Two requests for one number: the second waits here, then sees the first's order.
        with connection.cursor() as cursor:
            cursor.execute(ORDER_LOCK_SQL, [f"{organization.pk}:{number}"])
        _refuse_confirmed(organization, number)
        order = order_confirm(
            organization=organization,
            number=number,
            total_cents=total_cents,
            currency=currency,
            items=items,
            status=outcome.status_fields if outcome else None,
            also_emit=_as_pipeline_emits(outcome),
            fields=fields,
        )
        if outcome is not None:
            outcome.save(order_id=order.pk)
    return order, outcome.execution if outcome else None


def _as_pipeline_emits(outcome: engine.Outcome | None) -> list[dict[str, Any]]:
    """order.pre's collected emits, each emitted through the pipeline door (its provenance)."""
    if outcome is None:
        return []
    execution = outcome.execution
    by = Provenance.pipeline(execution.pipeline_id, execution.id)
    return [{**spec, "provenance": by} for spec in outcome.emitted]


def _refuse_confirmed(organization: Organization, number: str) -> None:
    if Order.objects.filter(
        organization=organization, number=number, status=Order.Status.CONFIRMED
    ).exists():
        raise OrderExists(f"order {number!r} is already confirmed")


def execution_rerun(execution: Execution, *, actor: str) -> Execution:
    """Run a FAILED execution's pipeline again over its trigger event (resuming it: steps that
    are not safe to repeat and succeeded are kept). order.post: a success also stamps the order
    post-processed. Raises ValueError for an execution that is not FAILED or has no event."""
    if execution.status != Execution.Status.FAILED:
        raise ValueError(f"only a FAILED execution can be re-run; this one is {execution.status}")
    if execution.event_id is None:
        raise ValueError("this execution has no trigger event to run over (order.pre runs once)")
    event = EventLog.objects.filter(
        pk=execution.event_id, organization_id=execution.organization_id
    ).first()
    if event is None:
        raise ValueError("this execution has no trigger event to run over (order.pre runs once)")
    pipeline = execution.pipeline
    if pipeline.trigger == TRIGGER_ORDER_POST:
        context = order_context(event.payload)
    else:
        context = event_context(_as_event(event))
    outcome = engine.run(pipeline, context=context, event_id=event.id, order_id=execution.order_id)
    if not outcome.failed and pipeline.trigger == TRIGGER_ORDER_POST and execution.order_id:
        Order.objects.filter(
            pk=execution.order_id, organization_id=execution.organization_id, post_processed_at=None
        ).update(post_processed_at=timezone.now())
    if not outcome.failed:
        _dead_delivery_settle(execution, event, actor=actor)
    audit.record(
        actor=actor,
        action="pipeline.execution_rerun",
        target_type="pipelines.execution",
        target_id=execution.pk,
        organization_id=execution.organization_id,
        details={"status": outcome.execution.status},
    )
    return outcome.execution


# The consumer whose dead delivery a re-run of each kind of trigger stands in for.
RERUN_CONSUMERS = {TRIGGER_ORDER_POST: "order-post-worker"}
EVENT_PIPELINE_CONSUMER = "pipeline-event-worker"


def _dead_delivery_settle(execution: Execution, event: EventLog, *, actor: str) -> None:
    """The re-run did what the dead delivery was for: it leaves the DLQ (discarded, audited with
    the execution), so the DLQ and `/api/outbox?status=FAILED` stop showing it as failed.
    Reprocessing it instead would run the pipeline a third time."""
    consumer = RERUN_CONSUMERS.get(execution.pipeline.trigger, EVENT_PIPELINE_CONSUMER)
    dead = list(
        Delivery.objects.filter(
            event_id=event.pk,
            organization_id=execution.organization_id,
            consumer=consumer,
            status=DeliveryStatus.DEAD,
        ).values_list("pk", flat=True)
    )
    if dead:
        bus.deliveries_discard(
            delivery_ids=dead,
            actor=actor,
            reason=f"done by the admin re-run of pipeline execution {execution.pk}",
        )


def _as_event(row: EventLog) -> eventbus.Event:
    return eventbus.Event(
        id=row.id,
        organization_id=row.organization_id,
        event_type=row.event_type,
        entity_kind=row.entity_kind,
        entity_id=row.entity_id,
        payload=row.payload,
        metadata=row.metadata,
        created_at=row.created_at,
        consumer="admin-rerun",
        delivery_id=0,
        attempt=1,
        max_attempts=1,
    )


def problems_of(exc: DefinitionError) -> list[dict[str, Any]]:
    return [p.as_dict() for p in exc.problems]
