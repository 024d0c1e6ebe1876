"""The pipeline engine (seed 004): walks a definition over a context and tracks every step.

`run(pipeline, context=..., event_id=...)` records one `Execution` per (pipeline, event) and one
`Step` per node it reaches, as it goes (each step commits on its own, so a failed run stays
visible while the bus retries it). A retry of the same event resumes that execution: a node whose
type is not safe to repeat (`http-request`, `emit-event`) and that succeeded before is not run
again (its recorded output is reused); the others run again. An `http-request` sends
`Idempotency-Key: <execution id>:<node id>`, the same on every retry, so the receiver can
deduplicate a call whose answer was lost.

`collect=True` (order.pre, in the order request) writes nothing: set-status and emit-event are
collected on the outcome, and the caller saves the execution with the order (`Outcome.save`).

Walking: nodes run in topological order when an edge into them was followed. A node that
succeeds follows its unbranched and `success` edges (a condition: `true` or `false`). A node that
fails follows its `failure` edges if it has any; else `onError: continue` follows its unbranched
edges, and `onError: abort` (the default) stops the run: the execution is FAILED.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

import eventbus
from crm.models import Order
from eventbus.store import catalog
from eventbus.store.errors import EmitRateLimited
from eventbus.store.provenance import Provenance
from pipelines import metrics, secrets, templating
from pipelines.conf import ALLOW_PRIVATE_SETTING, pipeline_settings
from pipelines.definition import DefinitionError, Graph, Node, parse
from pipelines.models import AllowedHost, Execution, Pipeline, Step

if TYPE_CHECKING:
    import httpx  # imported by the http_request node (~11 MB with core.http), not every process

logger = logging.getLogger(__name__)
RUNNING, SUCCEEDED, FAILED = "RUNNING", "SUCCEEDED", "FAILED"
# Nodes whose effects on the database belong in the step's own transaction.
TRANSACTIONAL_NODES = ("set-status", "emit-event")
# The Order columns set-status writes, and their lengths (crm.models.Order).
STATUS_LIMITS = {"status_tag": 64, "status_name": 200, "phase": 64}


class NodeFailure(Exception):
    """A node did not do its job; the message is the step's error."""


@dataclass
class NodeResult:
    ok: bool
    output: Any = None
    error: str = ""
    branch: str | None = None  # a condition's "true"/"false"


@dataclass
class Outcome:
    """What a run did. In collect mode, also what the caller must write with the order."""

    execution: Execution
    steps: list[Step]
    emitted: list[dict[str, Any]] = field(default_factory=list)
    status_fields: dict[str, str] = field(default_factory=dict)
    already_succeeded: bool = False

    @property
    def failed(self) -> bool:
        return self.execution.status == FAILED

    def save(self, *, order_id: uuid.UUID | None = None) -> None:
        """Write a collected (order.pre) execution and its steps: call it in the order's
        transaction."""
        self.execution.order_id = order_id
        self.execution.save(force_insert=True)
        for step in self.steps:
            step.execution = self.execution
        Step.objects.bulk_create(self.steps)


@dataclass
class _Run:
    pipeline: Pipeline
    execution: Execution
    context: dict[str, Any]
    collect: bool
    event_id: uuid.UUID | None
    outcome: Outcome


def run(
    pipeline: Pipeline,
    *,
    context: Mapping[str, Any],
    event_id: uuid.UUID | None = None,
    order_id: uuid.UUID | str | None = None,
    collect: bool = False,
) -> Outcome:
    """Run `pipeline` over `context`; see the module docstring. Never raises for a node's
    failure: the outcome's execution says FAILED, with the node and the error."""
    execution, previous = _begin(pipeline, event_id, order_id, collect=collect)
    if execution.status == SUCCEEDED:  # a redelivery of an event already handled
        return Outcome(execution, list(previous.values()), already_succeeded=True)
    outcome = Outcome(execution, [])
    state = _Run(pipeline, execution, {**context, "steps": {}}, collect, event_id, outcome)
    try:
        graph = parse(secrets.restore(pipeline.definition, pipeline.secret_headers()))
    except (DefinitionError, secrets.MaskedWithoutSecret) as exc:
        return _finish(state, FAILED, "", f"the definition does not validate: {exc}")
    return _walk(state, graph, previous)


def _begin(
    pipeline: Pipeline,
    event_id: uuid.UUID | None,
    order_id: uuid.UUID | str | None,
    *,
    collect: bool,
) -> tuple[Execution, dict[str, Step]]:
    """A new execution, or the event's earlier one (RUNNING again) with its steps by node."""
    fields = {
        "organization_id": pipeline.organization_id,
        "trigger": pipeline.trigger,
        "order_id": order_id,
        "started_at": timezone.now(),
    }
    if collect or event_id is None:
        execution = Execution(pipeline=pipeline, event_id=event_id, **fields)
        if not collect:
            execution.save(force_insert=True)
        return execution, {}
    execution, created = Execution.objects.get_or_create(
        pipeline=pipeline, event_id=event_id, defaults=fields
    )
    if created:
        return execution, {}
    previous = {s.node_id: s for s in execution.steps.all()}
    if execution.status != SUCCEEDED:
        execution.attempts += 1
        execution.status, execution.error, execution.failed_node = RUNNING, "", ""
        execution.finished_at = None
        execution.save(update_fields=["attempts", "status", "error", "failed_node", "finished_at"])
    return execution, previous


def _walk(state: _Run, graph: Graph, previous: dict[str, Step]) -> Outcome:
    start = next(n for n in graph.order if graph.nodes[n].type == "start")
    active = {start}
    for position, node_id in enumerate(graph.order):
        if node_id not in active:
            continue
        node = graph.nodes[node_id]
        earlier = previous.get(node_id)
        if node.type == "start":
            result = NodeResult(True, {})  # nothing to track
        elif earlier is not None and earlier.status == SUCCEEDED and not node.kind.rerun_on_retry:
            result = NodeResult(True, earlier.output)  # resumed: not repeated
            state.outcome.steps.append(earlier)
        else:
            result = _run_step(state, node, position, earlier)
        state.context["steps"][node_id] = result.output
        branches = _branches(node, result, graph)
        if branches is None:
            return _finish(state, FAILED, node_id, f"step {node_id!r} failed: {result.error}")
        active.update(e.target for e in graph.out_edges(node_id) if e.branch in branches)
    return _finish(state, SUCCEEDED, "", "")


def _branches(node: Node, result: NodeResult, graph: Graph) -> set[str | None] | None:
    """The branches to follow, or None to abort the run."""
    if node.type == "condition":
        if result.ok:
            return {result.branch}
        return {"false"} if node.on_error == "continue" else None
    if result.ok:
        return {None, "success"}
    if any(e.branch == "failure" for e in graph.out_edges(node.id)):
        return {"failure"}
    return {None} if node.on_error == "continue" else None


def _run_step(state: _Run, node: Node, position: int, earlier: Step | None) -> NodeResult:
    step = earlier or Step(
        organization_id=state.pipeline.organization_id,
        execution=state.execution,
        node_id=node.id,
        node_type=node.type,
        position=position,
        attempts=0,
    )
    step.attempts += 1
    step.status, step.error, step.finished_at = RUNNING, "", None
    step.started_at = timezone.now()
    persist = not state.collect
    if persist:
        step.save()
    started = time.monotonic()
    inputs: dict[str, Any] = {}
    if persist and node.type in TRANSACTIONAL_NODES:
        with transaction.atomic():
            result = _execute(state, node, inputs)
            _finish_step(step, result, inputs, started, save=True)
    else:
        result = _execute(state, node, inputs)
        _finish_step(step, result, inputs, started, save=persist)
    state.outcome.steps.append(step)
    return result


def _finish_step(
    step: Step, result: NodeResult, inputs: dict[str, Any], started: float, *, save: bool
) -> None:
    step.status = SUCCEEDED if result.ok else FAILED
    step.finished_at = timezone.now()
    step.duration_ms = int((time.monotonic() - started) * 1000)
    step.input_excerpt = excerpt(inputs)
    step.output_excerpt = excerpt(result.output) if result.output is not None else ""
    step.output = bounded(result.output)
    step.error = result.error[: pipeline_settings.EXCERPT_CHARS]
    metrics.STEP_SECONDS.labels(step.node_type, step.status).observe(time.monotonic() - started)
    if save:
        step.save()


def _execute(state: _Run, node: Node, inputs: dict[str, Any]) -> NodeResult:
    try:
        if node.type == "condition":
            expression = node.config["expression"]
            inputs["expression"] = expression
            value = templating.evaluate(expression, state.context)
            return NodeResult(True, {"result": value}, branch="true" if value else "false")
        return NodeResult(True, NODE_RUNNERS[node.type](state, node, inputs))
    except (templating.TemplateFailure, NodeFailure) as exc:
        return NodeResult(False, error=str(exc))
    except (TypeError, ValueError) as exc:  # what a rendered value made unusable
        return NodeResult(False, error=f"{type(exc).__name__}: {exc}")


def _http_request(state: _Run, node: Node, inputs: dict[str, Any]) -> dict[str, Any]:
    import httpx

    from core.http import UnsendableURL, guarded_client, parse_url

    config = node.config
    method = config.get("method", "POST")
    url_text = templating.render(config["url"], state.context)
    headers = {
        str(k): str(v)
        for k, v in templating.render(config.get("headers", {}), state.context).items()
    }
    body = templating.render(config["body"], state.context) if "body" in config else None
    declared = config.get("secretHeaders", [])
    inputs.update(
        method=method,
        url=secrets.redact_url(url_text),
        headers=secrets.redacted_headers(headers, declared),
        body=body,
    )
    try:
        url = parse_url(url_text.strip())
    except UnsendableURL as exc:
        raise NodeFailure(str(exc)) from None
    host = url.host.lower()
    if not host_allowed(state.pipeline.organization_id, host):
        raise NodeFailure(
            f"host {host!r} is not in this organization's pipeline host allowlist "
            "(admin: Pipelines > Allowed hosts)"
        )
    headers["Idempotency-Key"] = f"{state.execution.id}:{node.id}"
    try:
        with guarded_client(
            timeout=pipeline_settings.HTTP_TIMEOUT,
            allow_private=pipeline_settings.ALLOW_PRIVATE_TARGETS,
            allow_private_setting=ALLOW_PRIVATE_SETTING,
            max_connections=1,
        ) as client:
            response = client.request(method, url, headers=headers, json=body)
    except httpx.HTTPError as exc:
        raise NodeFailure(f"{method} {host}: {type(exc).__name__}: {exc}") from None
    answer = _answer(response)
    if 300 <= response.status_code < 400:
        raise NodeFailure(
            f"{method} {host} answered HTTP {response.status_code} (a redirect: not followed)"
        )
    if response.status_code >= 400:
        raise NodeFailure(f"{method} {host} answered HTTP {response.status_code}: {answer!s:.200}")
    return {"status": response.status_code, "body": answer}


def _answer(response: httpx.Response) -> Any:
    text = response.text[: pipeline_settings.EXCERPT_CHARS]
    if "json" in response.headers.get("content-type", ""):
        try:
            return json.loads(response.text)
        except ValueError:
            return text
    return text


def host_allowed(organization_id: uuid.UUID, host: str) -> bool:
    """Whether the organization's allowlist names `host` (or `*.parent` of it)."""
    hosts = set(
        AllowedHost.objects.filter(organization_id=organization_id).values_list("host", flat=True)
    )
    if host in hosts:
        return True
    labels = host.split(".")
    return any(f"*.{'.'.join(labels[i:])}" in hosts for i in range(1, len(labels)))


def _set_status(state: _Run, node: Node, inputs: dict[str, Any]) -> dict[str, str]:
    config = node.config
    values = {
        "status_tag": str(templating.render(config["statusTag"], state.context)),
        "status_name": str(templating.render(config.get("name", ""), state.context)),
        "phase": str(templating.render(config.get("phase", ""), state.context)),
    }
    inputs.update(values)
    for name, value in values.items():
        limit = STATUS_LIMITS[name]
        if len(value) > limit:
            raise NodeFailure(f"{name} is longer than {limit} characters")
    if state.collect:
        state.outcome.status_fields.update(values)
        return values
    order_id = (state.context.get("order") or {}).get("id")
    if not order_id:
        raise NodeFailure("this pipeline's context has no order to set the status of")
    updated = Order.objects.filter(
        pk=order_id, organization_id=state.pipeline.organization_id
    ).update(**values, updated_at=timezone.now())
    if not updated:
        raise NodeFailure(f"order {order_id} does not exist in this organization")
    return values


def _emit_event(state: _Run, node: Node, inputs: dict[str, Any]) -> dict[str, Any]:
    config = node.config
    event_type = config["eventType"]
    payload = templating.render(config.get("payload", {}), state.context)
    spec: dict[str, Any] = {
        "event_type": event_type,
        "entity_kind": config.get("entityKind", "pipeline"),
        "payload": payload,
        "idempotency_key": f"pipeline:{state.execution.id}:{node.id}",
    }
    order_id = (state.context.get("order") or {}).get("id")
    if spec["entity_kind"] == "order" and order_id:
        spec["entity_id"] = order_id
    inputs.update(spec)
    try:
        catalog.check_door(event_type, catalog.PIPELINE)  # a definition saved before the door
        catalog.check_payload(catalog.latest(event_type), payload)
    except (eventbus.EventValidationError, KeyError, LookupError) as exc:
        raise NodeFailure(f"event {event_type}: {exc}") from None
    if state.collect:
        state.outcome.emitted.append(spec)
        return {"event_type": event_type, "collected": True}
    try:
        event = eventbus.emit(
            organization=state.pipeline.organization_id,
            causation_id=state.event_id,
            provenance=Provenance.pipeline(state.pipeline.pk, state.execution.id),
            **spec,
        )
    except (eventbus.EventValidationError, EmitRateLimited) as exc:
        raise NodeFailure(f"event {event_type}: {exc}") from None
    return {"event_type": event_type, "event_id": str(event.id)}


NODE_RUNNERS: dict[str, Callable[[_Run, Node, dict[str, Any]], Any]] = {
    "http-request": _http_request,
    "set-status": _set_status,
    "emit-event": _emit_event,
}


def _finish(state: _Run, status: str, node_id: str, error: str) -> Outcome:
    execution = state.execution
    execution.status, execution.failed_node = status, node_id
    execution.error = error[: pipeline_settings.EXCERPT_CHARS]
    execution.finished_at = timezone.now()
    if not state.collect:
        execution.save(update_fields=["status", "failed_node", "error", "finished_at"])
    metrics.EXECUTIONS.labels(metrics.trigger_kind(execution.trigger), status).inc()
    if status == FAILED:
        logger.warning(
            "pipeline execution %s failed at %s: %s",
            execution.id,
            node_id or "-",
            error,
            extra={
                "execution_id": str(execution.id),
                "pipeline_id": str(state.pipeline.pk),
                "organization_id": str(state.pipeline.organization_id),
                "event_id": str(state.event_id) if state.event_id else None,
                "attempt": execution.attempts,
            },
        )
    return state.outcome


def excerpt(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)
    limit = pipeline_settings.EXCERPT_CHARS
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded(value: Any) -> Any:
    """The value itself when its JSON fits the excerpt bound, else its excerpt."""
    if value is None:
        return None
    text = json.dumps(value, default=str, ensure_ascii=False)
    return (
        json.loads(text)
        if len(text) <= pipeline_settings.EXCERPT_CHARS
        else {"excerpt": excerpt(value)}
    )
