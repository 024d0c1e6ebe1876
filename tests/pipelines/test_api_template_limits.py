"""Template limits through the API: a definition holding a denial-of-service shape or a malformed
template is a prompt 400 on `definition.<node id>` naming the config field (never a 500, never on
`trigger`), and an order.pre template that only goes over a limit with the order's data is a
prompt 422 naming the step, with nothing written."""

from __future__ import annotations

import time

import pytest

from core.models import Organization
from crm.models import Order
from pipelines import services
from pipelines.models import Pipeline
from tests.support.api import api_client, error_of
from tests.support.pipelines import DOS_TEMPLATES, seed_example

pytestmark = pytest.mark.django_db

URL_SHAPES = {
    **{name: f"https://erp.example.com/{source}" for name, source in DOS_TEMPLATES.items()},
    "syntax-error": "https://erp.example.com/{{ order. }}",
}
# Wall seconds, request included, on a test machine at load 20+ (unbounded: minutes, or never).
PROMPT = 10.0


@pytest.mark.parametrize("url", URL_SHAPES.values(), ids=URL_SHAPES.keys())
def test_a_definition_with_a_dos_or_malformed_template_is_a_prompt_400_on_its_node(
    org: Organization, url: str
) -> None:
    client = api_client(org, "pipelines:write")
    body = {"name": "ERP", "trigger": "order.post", "definition": seed_example(url)}
    started = time.monotonic()
    response = client.post("/api/v1/pipelines", body, format="json")
    assert time.monotonic() - started < PROMPT
    error = error_of(response, 400, "validation_error")
    assert set(error["fields"]) == {"definition.notify"}
    assert error["fields"]["definition.notify"][0].startswith("config.url: template")
    assert not Pipeline.objects.exists()


def test_a_condition_and_a_body_are_reported_on_their_own_fields(org: Organization) -> None:
    definition = seed_example("https://erp.example.com/x")
    definition["nodes"][1]["config"]["body"] = {"n": "{{ [0]*10**9 }}"}
    definition["nodes"].append(
        {"id": "check", "type": "condition", "config": {"expression": "9**99999 > 1 and x"}}
    )
    definition["edges"].append({"from": "ok", "to": "check"})
    response = api_client(org, "pipelines:write").post(
        "/api/v1/pipelines",
        {"name": "ERP", "trigger": "order.post", "definition": definition},
        format="json",
    )
    error = error_of(response, 400, "validation_error")
    assert error["fields"]["definition.notify"][0].startswith("config.body: template")
    assert error["fields"]["definition.check"][0].startswith("config.expression: expression")
    assert "trigger" not in error["fields"]


ORDER = {"number": "P-7", "total_cents": 500000}


def test_order_pre_over_a_limit_with_the_order_s_data_is_a_prompt_422(org: Organization) -> None:
    loops = "{% for i in range(order.total_cents) %}{% for j in range(order.total_cents) %}"
    services.pipeline_create(
        organization=org,
        name="pre",
        trigger="order.pre",
        definition={
            "nodes": [
                {"id": "start", "type": "start"},
                {
                    "id": "tag",
                    "type": "set-status",
                    "config": {"statusTag": loops + "x{% endfor %}{% endfor %}"},
                },
            ],
            "edges": [{"from": "start", "to": "tag"}],
        },
        actor="test",
    )
    started = time.monotonic()
    response = api_client(org, "orders:write").post("/api/v1/orders", ORDER, format="json")
    assert time.monotonic() - started < PROMPT
    error = error_of(response, 422, "pipeline_failed")
    assert "goes over a limit" in error["fields"]["pipeline.tag"][0]
    assert not Order.objects.exists()
