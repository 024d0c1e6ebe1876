"""The engine (pipelines.engine) against a real loopback receiver: steps, branches, resume,
templates, SSRF refusals, causation of emitted events."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from core.models import Organization
from crm.models import Order
from crm.services import order_confirm
from eventbus.store.models import EventLog
from pipelines import engine, services
from pipelines.context import order_context
from pipelines.models import AllowedHost, Execution, Pipeline
from tests.support.pipelines import seed_example
from tests.support.receiver import Receiver, Reply

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("loopback_allowed")]


def make(org: Organization, definition: dict[str, Any], trigger: str = "order.post") -> Pipeline:
    return services.pipeline_create(
        organization=org, name="p", trigger=trigger, definition=definition, actor="test"
    )


def confirmed(org: Organization, number: str = "A-1", total_cents: int = 1234) -> EventLog:
    order = order_confirm(organization=org, number=number, total_cents=total_cents)
    return EventLog.objects.get(event_type="order.confirmed", entity_id=order.pk)


def run(pipeline: Pipeline, event: EventLog, **context: Any) -> engine.Outcome:
    return engine.run(
        pipeline,
        context={**order_context(event.payload), **context},
        event_id=event.id,
        order_id=event.payload["order_id"],
    )


def test_the_seed_example_notifies_the_erp_then_sets_the_status(
    org: Organization, erp: Receiver
) -> None:
    pipeline = make(org, seed_example(erp.url("/orders")))
    event = confirmed(org)
    outcome = run(pipeline, event)

    execution = Execution.objects.get(pipeline=pipeline)
    assert (execution.status, execution.event_id, execution.trigger) == (
        "SUCCEEDED",
        event.id,
        "order.post",
    )
    assert execution.finished_at is not None
    steps = list(execution.steps.order_by("position"))
    assert [(s.node_id, s.status) for s in steps] == [("notify", "SUCCEEDED"), ("ok", "SUCCEEDED")]
    assert all(s.duration_ms is not None and s.duration_ms >= 0 for s in steps)
    (request,) = erp.on("/orders")
    assert json.loads(request.body) == {"number": "A-1", "total": "12.34"}
    assert request.headers["idempotency-key"] == f"{execution.id}:notify"
    assert '"number": "A-1"' in steps[0].input_excerpt
    assert steps[0].output == {"status": 200, "body": "ok"}
    order = Order.objects.get(pk=event.entity_id)
    assert (order.status_tag, order.status_name, order.phase) == (
        "success",
        "Integrado ao ERP",
        "order.post",
    )
    assert not outcome.failed


def test_a_failing_receiver_fails_the_execution_and_a_retry_resumes_it(
    org: Organization, erp: Receiver
) -> None:
    pipeline = make(org, seed_example(erp.url("/orders")))
    event = confirmed(org)
    erp.replies["/orders"] = Reply(status=503, body=b"down")
    first = run(pipeline, event)
    assert first.failed
    execution = Execution.objects.get(pipeline=pipeline)
    assert (execution.status, execution.failed_node) == ("FAILED", "notify")
    assert "HTTP 503" in execution.error
    (notify,) = execution.steps.all()  # "ok" never ran
    assert notify.status == "FAILED" and "HTTP 503" in notify.error
    assert Order.objects.get(pk=event.entity_id).status_tag == ""

    erp.replies["/orders"] = Reply(status=200)
    again = run(pipeline, event)
    assert not again.failed
    execution.refresh_from_db()
    assert (execution.status, execution.attempts) == ("SUCCEEDED", 2)
    assert Execution.objects.count() == 1  # one execution per (pipeline, event)
    assert execution.steps.get(node_id="notify").attempts == 2
    keys = {r.headers["idempotency-key"] for r in erp.on("/orders")}
    assert keys == {f"{execution.id}:notify"}  # the same key on the retry

    third = run(pipeline, event)  # a redelivery after success changes nothing
    assert third.already_succeeded
    assert len(erp.on("/orders")) == 2


def test_a_retry_does_not_repeat_a_call_that_succeeded(org: Organization, erp: Receiver) -> None:
    pipeline = make(org, seed_example(erp.url("/orders")))
    event = confirmed(org)
    missing = {"order": {**order_context(event.payload)["order"], "id": str(uuid.uuid4())}}
    assert run(pipeline, event, **missing).failed  # set-status finds no such order
    assert Execution.objects.get().failed_node == "ok"
    assert not run(pipeline, event).failed
    assert len(erp.on("/orders")) == 1  # http-request is resumed, not re-sent
    assert Order.objects.get(pk=event.entity_id).status_tag == "success"


def test_a_template_naming_a_missing_field_is_a_step_error(
    org: Organization, erp: Receiver
) -> None:
    definition = seed_example(erp.url("/orders"))
    definition["nodes"][1]["config"]["body"] = {"customer": "{{ order.customer_code }}"}
    outcome = run(make(org, definition), confirmed(org))
    assert outcome.failed
    step = outcome.execution.steps.get(node_id="notify")
    assert step.status == "FAILED"
    assert "'dict object' has no attribute 'customer_code'" in step.error
    assert erp.requests == []


def test_a_template_over_a_limit_with_the_event_s_data_fails_its_step_with_the_reason(
    org: Organization, erp: Receiver
) -> None:
    definition = seed_example(erp.url("/orders"))
    definition["nodes"][1]["config"]["body"] = {
        "spam": "{{ 'x' * (order.total_cents * order.total_cents) }}"
    }
    outcome = run(make(org, definition), confirmed(org, total_cents=100_000))
    assert outcome.failed and outcome.execution.failed_node == "notify"
    step = outcome.execution.steps.get(node_id="notify")
    assert step.status == "FAILED"
    assert "goes over a limit: repetition to" in step.error
    assert erp.requests == []


def test_the_failure_branch_and_on_error_continue(org: Organization, erp: Receiver) -> None:
    erp.replies["/orders"] = Reply(status=500)
    with_branch = seed_example(erp.url("/orders"))
    with_branch["nodes"].append(
        {"id": "down", "type": "set-status", "config": {"statusTag": "erp_down"}}
    )
    with_branch["edges"].append({"from": "notify", "to": "down", "branch": "failure"})
    event = confirmed(org)
    outcome = run(make(org, with_branch), event)
    assert not outcome.failed
    assert [(s.node_id, s.status) for s in outcome.steps] == [
        ("notify", "FAILED"),
        ("down", "SUCCEEDED"),
    ]
    assert Order.objects.get(pk=event.entity_id).status_tag == "erp_down"

    Pipeline.objects.update(enabled=False)
    carry_on = seed_example(erp.url("/orders"), onError="continue")
    carry_on["edges"][1].pop("branch")  # an unbranched edge: followed when continuing
    other = confirmed(org, "A-2")
    outcome = run(make(org, carry_on), other)
    assert not outcome.failed
    assert [(s.node_id, s.status) for s in outcome.steps] == [
        ("notify", "FAILED"),
        ("ok", "SUCCEEDED"),
    ]


@pytest.mark.parametrize(("total", "tag"), [(50_000, "big"), (100, "small")])
def test_a_condition_branches_on_the_context(org: Organization, total: int, tag: str) -> None:
    definition = {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "big",
                "type": "condition",
                "config": {"expression": "order.total_cents >= 10000 and order.currency == 'BRL'"},
            },
            {"id": "yes", "type": "set-status", "config": {"statusTag": "big"}},
            {"id": "no", "type": "set-status", "config": {"statusTag": "small"}},
        ],
        "edges": [
            {"from": "start", "to": "big"},
            {"from": "big", "to": "yes", "branch": "true"},
            {"from": "big", "to": "no", "branch": "false"},
        ],
    }
    event = confirmed(org, total_cents=total)
    outcome = run(make(org, definition), event)
    assert [s.node_id for s in outcome.steps] == ["big", "yes" if tag == "big" else "no"]
    assert Order.objects.get(pk=event.entity_id).status_tag == tag


def test_a_condition_cannot_reach_python(org: Organization) -> None:
    definition = {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "c",
                "type": "condition",
                "config": {"expression": "order.__class__.__mro__ | length > 0"},
            },
            {"id": "yes", "type": "set-status", "config": {"statusTag": "pwned"}},
        ],
        "edges": [{"from": "start", "to": "c"}, {"from": "c", "to": "yes", "branch": "true"}],
    }
    outcome = run(make(org, definition), confirmed(org))
    assert outcome.failed
    assert "unsafe" in outcome.execution.steps.get(node_id="c").error


def test_emit_event_points_at_the_trigger_event_and_is_emitted_once(org: Organization) -> None:
    definition = {
        "nodes": [
            {"id": "start", "type": "start"},
            {
                "id": "tell",
                "type": "emit-event",
                "config": {
                    "eventType": "test.effect",
                    "entityKind": "order",
                    "payload": {"n": "{{ orderNumber }}"},
                },
            },
            {"id": "boom", "type": "set-status", "config": {"statusTag": "{{ nope }}"}},
        ],
        "edges": [{"from": "start", "to": "tell"}, {"from": "tell", "to": "boom"}],
    }
    pipeline = make(org, definition)
    event = confirmed(org)
    assert run(pipeline, event).failed
    assert run(pipeline, event).failed  # retried: tell is resumed, not emitted again
    (emitted,) = EventLog.objects.filter(event_type="test.effect")
    assert emitted.metadata["causation_id"] == str(event.id)
    assert emitted.payload == {"n": "A-1"}
    assert emitted.entity_id == event.entity_id


def test_outputs_are_bounded_and_secret_headers_are_not_recorded(
    org: Organization, erp: Receiver, settings: Any
) -> None:
    settings.PIPELINES = {**settings.PIPELINES, "EXCERPT_CHARS": 300}
    erp.replies["/orders"] = Reply(body=b"x" * 5000)
    definition = seed_example(erp.url("/orders"))
    definition["nodes"][1]["config"]["headers"] = {"Authorization": "Bearer s3cr3t-value"}
    outcome = run(make(org, definition), confirmed(org))
    step = outcome.execution.steps.get(node_id="notify")
    assert len(step.output_excerpt) <= 300
    assert "s3cr3t" not in step.input_excerpt
    assert erp.on("/orders")[0].headers["authorization"] == "Bearer s3cr3t-value"


@pytest.mark.parametrize(
    ("url", "allowed", "private_ok", "fragment"),
    [
        ("http://127.0.0.1:{port}/orders", [], True, "not in this organization's"),
        ("http://localhost:{port}/orders", ["127.0.0.1"], True, "not in this organization's"),
        ("http://127.0.0.1:{port}/orders", ["127.0.0.1"], False, "PIPELINES_ALLOW_PRIVATE"),
        ("http://169.254.169.254/latest/meta-data", ["169.254.169.254"], True, "169.254.169.254"),
        ("http://0x7f.1:{port}/orders", ["0x7f.1"], True, "url"),
        ("http://user:pw@127.0.0.1:{port}/orders", ["127.0.0.1"], True, "credentials"),
    ],
)
def test_http_request_refuses_what_the_guard_and_the_allowlist_refuse(
    org: Organization,
    erp: Receiver,
    settings: Any,
    url: str,
    allowed: list[str],
    private_ok: bool,
    fragment: str,
) -> None:
    AllowedHost.objects.all().delete()
    for host in allowed:
        AllowedHost.objects.create(organization=org, host=host)
    settings.PIPELINES = {**settings.PIPELINES, "ALLOW_PRIVATE_TARGETS": private_ok}
    outcome = run(make(org, seed_example(url.format(port=erp.port))), confirmed(org))
    assert outcome.failed
    error = outcome.execution.steps.get(node_id="notify").error
    assert fragment in error, error
    assert erp.requests == []


def test_redirects_are_not_followed(org: Organization, erp: Receiver) -> None:
    erp.replies["/orders"] = Reply(status=302, headers={"Location": erp.url("/elsewhere")})
    outcome = run(make(org, seed_example(erp.url("/orders"))), confirmed(org))
    assert "redirect" in outcome.execution.steps.get(node_id="notify").error
    assert [r.path for r in erp.requests] == ["/orders"]


def test_subdomain_wildcards_in_the_allowlist(org: Organization) -> None:
    AllowedHost.objects.create(organization=org, host="*.erp.example.com")
    assert engine.host_allowed(org.pk, "api.erp.example.com")
    assert not engine.host_allowed(org.pk, "erp.example.com")
    assert not engine.host_allowed(org.pk, "evil-erp.example.com")


def test_set_status_refuses_values_longer_than_the_order_columns(org: Organization) -> None:
    from crm.models import Order as OrderModel

    for name, limit in engine.STATUS_LIMITS.items():
        assert OrderModel._meta.get_field(name).max_length == limit  # type: ignore[union-attr]
    definition = {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "s", "type": "set-status", "config": {"statusTag": "x" * 65}},
        ],
        "edges": [{"from": "start", "to": "s"}],
    }
    outcome = run(make(org, definition), confirmed(org))
    assert "status_tag is longer than 64" in outcome.execution.steps.get().error


def test_runs_and_steps_are_counted(org: Organization, erp: Receiver) -> None:
    from prometheus_client import REGISTRY

    def sample(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    failed = sample("deskcomm_pipelines_executions_total", trigger="order.post", status="FAILED")
    steps = sample(
        "deskcomm_pipelines_step_duration_seconds_count", node_type="http-request", status="FAILED"
    )
    erp.replies["/orders"] = Reply(status=500)
    run(make(org, seed_example(erp.url("/orders"))), confirmed(org))
    assert (
        sample("deskcomm_pipelines_executions_total", trigger="order.post", status="FAILED")
        == failed + 1
    )
    assert (
        sample(
            "deskcomm_pipelines_step_duration_seconds_count",
            node_type="http-request",
            status="FAILED",
        )
        == steps + 1
    )


def test_a_header_the_client_cannot_send_is_a_step_error(org: Organization, erp: Receiver) -> None:
    definition = seed_example(erp.url("/orders"))
    definition["nodes"][1]["config"]["headers"] = {"X-Order": "{{ orderNumber }}\r\nX-Evil: 1"}
    outcome = run(make(org, definition), confirmed(org))
    assert outcome.failed
    step = outcome.execution.steps.get(node_id="notify")
    assert step.status == "FAILED" and step.error
    assert erp.requests == []
