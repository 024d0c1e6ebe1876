"""A pipeline's definition (seed 004's JSON shape) and its validation, with errors by node.

    {"nodes": [{"id": "start", "type": "start"},
               {"id": "notify", "type": "http-request", "config": {...}, "onError": "abort"}],
     "edges": [{"from": "start", "to": "notify"},
               {"from": "notify", "to": "ok", "branch": "success"}]}

Rules: one `start` node, with no edge into it; unique node ids; known node types with their
config; `onError` is `abort` (default) or `continue`; edges between existing nodes; no cycles;
every node reachable from `start`; branches `success`/`failure` only out of a node that can fail,
`true`/`false` (required) out of a `condition`, none out of `start`; templates and expressions
compile; emit-event's type is in the catalog and open to pipelines (its `pipeline` door).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eventbus.store import catalog
from eventbus.store.errors import EventValidationError
from pipelines import templating

TRIGGER_ORDER_PRE = "order.pre"
TRIGGER_ORDER_POST = "order.post"
EVENT_PREFIX = "event."
# The consumer that runs event.<type> pipelines (pipelines/handlers.py).
EVENT_WORKER = "pipeline-event-worker"
NODE_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ON_ERROR = ("abort", "continue")
MAX_NODES = 100


@dataclass(frozen=True)
class Problem:
    node: str | None  # the node (or edge's source node) at fault; None: the whole definition
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "message": self.message}

    def __str__(self) -> str:
        return f"node {self.node!r}: {self.message}" if self.node else self.message


class DefinitionError(ValueError):
    """A definition that does not validate; `problems` name the node of each one."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(str(p) for p in problems))


@dataclass(frozen=True)
class NodeType:
    name: str
    can_fail: bool
    branches: tuple[str, ...]  # the branch names its out-edges may carry
    branch_required: bool
    rerun_on_retry: bool  # False: a step that succeeded in an earlier attempt is not repeated
    check_config: Callable[[Mapping[str, Any], list[str]], None]


def _no_config(config: Mapping[str, Any], errors: list[str]) -> None:
    if config:
        errors.append(f"takes no config, got {sorted(config)}")


def _known_keys(config: Mapping[str, Any], allowed: set[str], errors: list[str]) -> None:
    unknown = sorted(set(config) - allowed)
    if unknown:
        errors.append(f"unknown config key(s) {unknown}; allowed: {sorted(allowed)}")


def _template_string(
    config: Mapping[str, Any], key: str, errors: list[str], *, required: bool
) -> None:
    value = config.get(key)
    if value is None:
        if required:
            errors.append(f"config.{key} is required")
        return
    if not isinstance(value, str) or (required and not value.strip()):
        errors.append(f"config.{key} must be a non-empty string")
        return
    _compiles(value, f"config.{key}", errors)


def _compiles(value: Any, where: str, errors: list[str]) -> None:
    try:
        templating.check_templates(value)
    except templating.TemplateFailure as exc:
        errors.append(f"{where}: {exc}")


def _http_config(config: Mapping[str, Any], errors: list[str]) -> None:
    _known_keys(config, {"method", "url", "headers", "body", "secretHeaders"}, errors)
    method = config.get("method", "POST")
    if method not in HTTP_METHODS:
        errors.append(f"config.method must be one of {list(HTTP_METHODS)}, got {method!r}")
    _template_string(config, "url", errors, required=True)
    url = config.get("url")
    if isinstance(url, str) and not re.match(r"^https?://", url.strip(), re.IGNORECASE):
        errors.append("config.url must start with http:// or https://")
    headers = config.get("headers", {})
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        errors.append("config.headers must be an object of strings")
    else:
        _compiles(dict(headers), "config.headers", errors)
        if any(k.lower() == "idempotency-key" for k in headers):
            errors.append("config.headers: Idempotency-Key is set by the engine")
        declared = config.get("secretHeaders", [])
        if not isinstance(declared, list) or not all(
            isinstance(d, str) and d in headers for d in declared
        ):
            errors.append("config.secretHeaders must be a list of names of config.headers")
    if "body" in config:
        _compiles(config["body"], "config.body", errors)


def _set_status_config(config: Mapping[str, Any], errors: list[str]) -> None:
    _known_keys(config, {"statusTag", "name", "phase"}, errors)
    _template_string(config, "statusTag", errors, required=True)
    for key in ("name", "phase"):
        _template_string(config, key, errors, required=False)


def _emit_config(config: Mapping[str, Any], errors: list[str]) -> None:
    _known_keys(config, {"eventType", "entityKind", "payload"}, errors)
    event_type = config.get("eventType")
    try:
        catalog.validate_event_type(event_type)
        if not catalog.is_declared(str(event_type)):
            errors.append(f"config.eventType {event_type!r} is not in the event catalog")
        elif not catalog.emittable(str(event_type), catalog.PIPELINE):
            errors.append(
                f"config.eventType {event_type!r} is owned by "
                f"{catalog.owner_of(str(event_type))} and is not open to pipelines (the types "
                "GET /api/v1/event-types lists with the `pipeline` door are)"
            )
    except EventValidationError:
        errors.append(f"config.eventType {event_type!r} is not an event type ('entity.action')")
    kind = config.get("entityKind", "pipeline")
    if not isinstance(kind, str) or not kind.strip() or len(kind) > 64:
        errors.append("config.entityKind must be a non-empty string of at most 64 characters")
    payload = config.get("payload", {})
    if not isinstance(payload, Mapping):
        errors.append("config.payload must be an object")
    else:
        _compiles(dict(payload), "config.payload", errors)


def _condition_config(config: Mapping[str, Any], errors: list[str]) -> None:
    _known_keys(config, {"expression"}, errors)
    expression = config.get("expression")
    if not isinstance(expression, str):
        errors.append("config.expression is required (a string)")
        return
    try:
        templating.check_expression(expression)
    except templating.TemplateFailure as exc:
        errors.append(f"config.expression: {exc}")


NODE_TYPES: dict[str, NodeType] = {
    t.name: t
    for t in (
        NodeType("start", False, (), False, True, _no_config),
        NodeType("http-request", True, ("success", "failure"), False, False, _http_config),
        NodeType("set-status", True, ("success", "failure"), False, True, _set_status_config),
        NodeType("emit-event", True, ("success", "failure"), False, False, _emit_config),
        NodeType("condition", False, ("true", "false"), True, True, _condition_config),
    )
}


@dataclass(frozen=True)
class Node:
    id: str
    type: str
    config: dict[str, Any]
    on_error: str

    @property
    def kind(self) -> NodeType:
        return NODE_TYPES[self.type]


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    branch: str | None


@dataclass(frozen=True)
class Graph:
    nodes: dict[str, Node]
    edges: list[Edge]
    order: list[str] = field(default_factory=list)  # topological, start first

    def out_edges(self, node_id: str) -> list[Edge]:
        return [e for e in self.edges if e.source == node_id]


def validate_trigger(trigger: object) -> str:
    """The trigger if valid: order.pre, order.post or event.<declared type>; else ValueError."""
    if trigger in (TRIGGER_ORDER_PRE, TRIGGER_ORDER_POST):
        return str(trigger)
    if isinstance(trigger, str) and trigger.startswith(EVENT_PREFIX):
        event_type = trigger[len(EVENT_PREFIX) :]
        if event_type == "order.confirmed":
            raise ValueError("order.confirmed runs the order.post pipeline: use trigger order.post")
        try:
            catalog.validate_event_type(event_type)
        except EventValidationError:
            raise ValueError(f"{trigger!r}: {event_type!r} is not an event type") from None
        if not catalog.is_declared(event_type):
            raise ValueError(f"{trigger!r}: {event_type!r} is not in the event catalog")
        return trigger
    raise ValueError(f"trigger must be order.pre, order.post or event.<type>, got {trigger!r}")


def parse(definition: object) -> Graph:
    """The validated graph of `definition`, or DefinitionError listing every problem."""
    problems: list[Problem] = []
    if not isinstance(definition, Mapping):
        raise DefinitionError([Problem(None, "the definition must be an object")])
    unknown = sorted(set(definition) - {"nodes", "edges"})
    if unknown:
        problems.append(Problem(None, f"unknown key(s) {unknown}: expected nodes and edges"))
    raw_nodes, raw_edges = definition.get("nodes"), definition.get("edges", [])
    if not isinstance(raw_nodes, list) or not raw_nodes:
        raise DefinitionError([*problems, Problem(None, "nodes must be a non-empty list")])
    if not isinstance(raw_edges, list):
        raise DefinitionError([*problems, Problem(None, "edges must be a list")])
    if len(raw_nodes) > MAX_NODES:
        raise DefinitionError([Problem(None, f"at most {MAX_NODES} nodes")])
    with templating.budget_scope(probe=True):  # one template budget for the whole definition
        nodes = _nodes(raw_nodes, problems)
    edges = _edges(raw_edges, nodes, problems)
    starts = [n.id for n in nodes.values() if n.type == "start"]
    if len(starts) != 1:
        problems.append(Problem(None, f"exactly one start node is required, found {len(starts)}"))
    for edge in edges:
        if edge.target in starts:
            problems.append(Problem(edge.source, f"edge into the start node {edge.target!r}"))
    order = _topological(nodes, edges, problems)
    if len(starts) == 1 and order:
        reachable = _reachable(starts[0], edges)
        for node_id in nodes:
            if node_id not in reachable:
                problems.append(Problem(node_id, "is not reachable from the start node"))
    if problems:
        raise DefinitionError(problems)
    return Graph(nodes, edges, order)


def _nodes(raw_nodes: list[Any], problems: list[Problem]) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    for index, raw in enumerate(raw_nodes):
        if not isinstance(raw, Mapping):
            problems.append(Problem(None, f"nodes[{index}] must be an object"))
            continue
        node_id = raw.get("id")
        if not isinstance(node_id, str) or not NODE_ID.match(node_id):
            problems.append(
                Problem(None, f"nodes[{index}].id {node_id!r}: letters, digits, - and _ (max 64)")
            )
            continue
        if node_id in nodes:
            problems.append(Problem(node_id, "duplicate node id"))
            continue
        errors: list[str] = []
        unknown = sorted(set(raw) - {"id", "type", "config", "onError", "label"})
        if unknown:
            errors.append(f"unknown key(s) {unknown}")
        node_type = raw.get("type")
        config = raw.get("config", {})
        on_error = raw.get("onError", "abort")
        if on_error not in ON_ERROR:
            errors.append(f"onError must be abort or continue, got {on_error!r}")
        if not isinstance(config, Mapping):
            errors.append("config must be an object")
            config = {}
        if not isinstance(node_type, str) or node_type not in NODE_TYPES:
            errors.append(f"unknown node type {node_type!r}; known: {sorted(NODE_TYPES)}")
        else:
            NODE_TYPES[node_type].check_config(config, errors)
        problems.extend(Problem(node_id, e) for e in errors)
        if isinstance(node_type, str) and node_type in NODE_TYPES:
            nodes[node_id] = Node(node_id, node_type, dict(config), str(on_error))
    return nodes


def _edges(raw_edges: list[Any], nodes: dict[str, Node], problems: list[Problem]) -> list[Edge]:
    edges: list[Edge] = []
    seen: set[tuple[str, str, str | None]] = set()
    for index, raw in enumerate(raw_edges):
        if not isinstance(raw, Mapping):
            problems.append(Problem(None, f"edges[{index}] must be an object"))
            continue
        source, target, branch = raw.get("from"), raw.get("to"), raw.get("branch")
        unknown = sorted(set(raw) - {"from", "to", "branch"})
        where = source if isinstance(source, str) and source in nodes else None
        if unknown:
            problems.append(Problem(where, f"edges[{index}]: unknown key(s) {unknown}"))
        if not isinstance(source, str) or source not in nodes:
            problems.append(Problem(None, f"edges[{index}]: from {source!r} is not a node"))
            continue
        if not isinstance(target, str) or target not in nodes:
            problems.append(Problem(source, f"edges[{index}]: to {target!r} is not a node"))
            continue
        kind = nodes[source].kind
        if branch is None:
            if kind.branch_required:
                problems.append(
                    Problem(source, f"edge to {target!r} needs a branch: {list(kind.branches)}")
                )
                continue
        elif branch not in kind.branches:
            allowed = f"one of {list(kind.branches)}" if kind.branches else "none (it cannot fail)"
            problems.append(
                Problem(source, f"edge to {target!r}: branch {branch!r} not allowed; {allowed}")
            )
            continue
        if source == target:
            problems.append(Problem(source, "edge from a node to itself (a cycle)"))
            continue
        key = (source, target, branch)
        if key in seen:
            problems.append(Problem(source, f"duplicate edge to {target!r}"))
            continue
        seen.add(key)
        edges.append(Edge(source, target, branch))
    return edges


def _topological(nodes: dict[str, Node], edges: list[Edge], problems: list[Problem]) -> list[str]:
    incoming = dict.fromkeys(nodes, 0)
    for e in edges:
        incoming[e.target] += 1
    ready = [n for n in nodes if incoming[n] == 0]
    order: list[str] = []
    while ready:
        node_id = ready.pop(0)
        order.append(node_id)
        for e in edges:
            if e.source == node_id:
                incoming[e.target] -= 1
                if incoming[e.target] == 0:
                    ready.append(e.target)
    if len(order) < len(nodes):
        cyclic = sorted(set(nodes) - set(order))
        for node_id in cyclic:
            problems.append(Problem(node_id, "is part of a cycle"))
        return []
    return order


def _reachable(start: str, edges: list[Edge]) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        current = todo.pop()
        for e in edges:
            if e.source == current and e.target not in seen:
                seen.add(e.target)
                todo.append(e.target)
    return seen
