"""Definition validation (pipelines.definition): every kind of bad definition, named by node."""

from __future__ import annotations

from typing import Any

import pytest

from pipelines.definition import DefinitionError, parse, validate_trigger
from tests.support.pipelines import seed_example

START = {"id": "start", "type": "start"}


def problems(definition: Any) -> list[tuple[str | None, str]]:
    with pytest.raises(DefinitionError) as raised:
        parse(definition)
    return [(p.node, p.message) for p in raised.value.problems]


def test_the_seed_example_validates_in_order() -> None:
    graph = parse(seed_example("https://erp.exemplo.com/orders"))
    assert graph.order == ["start", "notify", "ok"]


@pytest.mark.parametrize(
    ("definition", "node", "fragment"),
    [
        ([], None, "must be an object"),
        ({"nodes": []}, None, "non-empty list"),
        ({"nodes": [START], "edges": {}}, None, "edges must be a list"),
        ({"nodes": [START], "extra": 1}, None, "unknown key"),
        (
            {"nodes": [{"id": "a", "type": "condition", "config": {"expression": "1"}}]},
            None,
            "exactly one start",
        ),
        (
            {
                "nodes": [START, {"id": "start2", "type": "start"}],
                "edges": [{"from": "start", "to": "start2"}],
            },
            None,
            "exactly one start",
        ),
        ({"nodes": [START, START]}, "start", "duplicate node id"),
        (
            {
                "nodes": [START, {"id": "x", "type": "teleport"}],
                "edges": [{"from": "start", "to": "x"}],
            },
            "x",
            "unknown node type",
        ),
        ({"nodes": [START, {"id": "9bad", "type": "start"}]}, None, "letters, digits"),
        ({"nodes": [START], "edges": [{"from": "start", "to": "ghost"}]}, "start", "not a node"),
        ({"nodes": [START], "edges": [{"from": "ghost", "to": "start"}]}, None, "not a node"),
        (
            {
                "nodes": [
                    START,
                    {"id": "a", "type": "set-status", "config": {"statusTag": "x"}},
                    {"id": "b", "type": "set-status", "config": {"statusTag": "y"}},
                ],
                "edges": [
                    {"from": "start", "to": "a"},
                    {"from": "a", "to": "b"},
                    {"from": "b", "to": "a"},
                ],
            },
            "a",
            "part of a cycle",
        ),
        (
            {"nodes": [START], "edges": [{"from": "start", "to": "start"}]},
            "start",
            "to itself",
        ),
        (
            {
                "nodes": [START, {"id": "a", "type": "set-status", "config": {"statusTag": "x"}}],
                "edges": [{"from": "start", "to": "a"}, {"from": "a", "to": "start"}],
            },
            "a",
            "edge into the start node",
        ),
        (
            {
                "nodes": [START, {"id": "a", "type": "set-status", "config": {"statusTag": "x"}}],
                "edges": [{"from": "start", "to": "a", "branch": "failure"}],
            },
            "start",
            "cannot fail",
        ),
        (
            {
                "nodes": [
                    START,
                    {"id": "c", "type": "condition", "config": {"expression": "1 > 0"}},
                    {"id": "a", "type": "set-status", "config": {"statusTag": "x"}},
                ],
                "edges": [
                    {"from": "start", "to": "c"},
                    {"from": "c", "to": "a", "branch": "success"},
                ],
            },
            "c",
            "branch 'success' not allowed",
        ),
        (
            {
                "nodes": [
                    START,
                    {"id": "c", "type": "condition", "config": {"expression": "1 > 0"}},
                    {"id": "a", "type": "set-status", "config": {"statusTag": "x"}},
                ],
                "edges": [{"from": "start", "to": "c"}, {"from": "c", "to": "a"}],
            },
            "c",
            "needs a branch",
        ),
        (
            {"nodes": [START, {"id": "a", "type": "set-status", "config": {"statusTag": "x"}}]},
            "a",
            "not reachable",
        ),
        (
            {
                "nodes": [START, {"id": "h", "type": "http-request", "config": {}}],
                "edges": [{"from": "start", "to": "h"}],
            },
            "h",
            "config.url is required",
        ),
        (
            {
                "nodes": [
                    START,
                    {"id": "h", "type": "http-request", "config": {"url": "ftp://x.example/f"}},
                ],
                "edges": [{"from": "start", "to": "h"}],
            },
            "h",
            "http:// or https://",
        ),
        (
            {
                "nodes": [
                    START,
                    {
                        "id": "h",
                        "type": "http-request",
                        "config": {"url": "https://x.example", "method": "TRACE"},
                    },
                ],
                "edges": [{"from": "start", "to": "h"}],
            },
            "h",
            "config.method",
        ),
        (
            {
                "nodes": [
                    START,
                    {
                        "id": "h",
                        "type": "http-request",
                        "config": {"url": "https://x.example", "body": "{{ oops"},
                    },
                ],
                "edges": [{"from": "start", "to": "h"}],
            },
            "h",
            "does not compile",
        ),
        (
            {
                "nodes": [
                    START,
                    {
                        "id": "h",
                        "type": "http-request",
                        "config": {"url": "https://x.example", "verb": "GET"},
                    },
                ],
                "edges": [{"from": "start", "to": "h"}],
            },
            "h",
            "unknown config key",
        ),
        (
            {
                "nodes": [
                    START,
                    {
                        "id": "h",
                        "type": "http-request",
                        "onError": "retry",
                        "config": {"url": "https://x.example"},
                    },
                ],
                "edges": [{"from": "start", "to": "h"}],
            },
            "h",
            "onError must be",
        ),
        (
            {
                "nodes": [START, {"id": "s", "type": "set-status", "config": {}}],
                "edges": [{"from": "start", "to": "s"}],
            },
            "s",
            "config.statusTag is required",
        ),
        (
            {
                "nodes": [
                    START,
                    {"id": "e", "type": "emit-event", "config": {"eventType": "no.such"}},
                ],
                "edges": [{"from": "start", "to": "e"}],
            },
            "e",
            "not in the event catalog",
        ),
        (
            {
                "nodes": [START, {"id": "e", "type": "emit-event", "config": {"eventType": "Bad"}}],
                "edges": [{"from": "start", "to": "e"}],
            },
            "e",
            "not an event type",
        ),
        (
            {
                "nodes": [START, {"id": "c", "type": "condition", "config": {}}],
                "edges": [{"from": "start", "to": "c", "branch": "true"}],
            },
            "start",
            "cannot fail",
        ),
        (
            {
                "nodes": [
                    START,
                    {"id": "c", "type": "condition", "config": {"expression": "a ==="}},
                ],
                "edges": [],
            },
            "c",
            "does not compile",
        ),
        ({"nodes": [{**START, "config": {"x": 1}}]}, "start", "takes no config"),
    ],
)
def test_each_kind_of_bad_definition_is_refused_naming_the_node(
    definition: Any, node: str | None, fragment: str
) -> None:
    found = problems(definition)
    assert any(n == node and fragment in message for n, message in found), found


def test_every_problem_is_reported_at_once() -> None:
    found = problems(
        {
            "nodes": [
                START,
                {"id": "h", "type": "http-request", "config": {}},
                {"id": "s", "type": "set-status", "config": {}},
            ],
            "edges": [{"from": "start", "to": "h"}, {"from": "h", "to": "s"}],
        }
    )
    assert {n for n, _ in found} == {"h", "s"}


@pytest.mark.parametrize(
    ("trigger", "ok"),
    [
        ("order.pre", True),
        ("order.post", True),
        ("event.lead.stage_changed", True),
        ("event.order.confirmed", False),  # that is order.post
        ("event.no.such", False),
        ("event.Bad", False),
        ("order.mid", False),
        ("", False),
    ],
)
def test_triggers(trigger: str, ok: bool) -> None:
    if ok:
        assert validate_trigger(trigger) == trigger
    else:
        with pytest.raises(ValueError):
            validate_trigger(trigger)
