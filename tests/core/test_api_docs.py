"""/api/schema/ (OpenAPI 3) and /api/docs/ (Swagger UI from our own static files, no CDN)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import jsonschema
import pytest
from django.core.management import call_command
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from core import scopes

pytestmark = pytest.mark.django_db

ASSET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


def test_schema_is_openapi_3_with_every_endpoint_and_the_error_shape() -> None:
    response = Client().get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) == {
        "/api/ping",
        "/api/v1/health",
        "/api/v1/event-types",
        "/api/v1/events",
        "/api/v1/events/{event_id}",
        "/api/v1/events/{event_id}/reprocess",
        "/api/v1/events/{event_id}/discard",
        "/api/v1/consumers/{consumer}",
        "/api/v1/consumers/{consumer}/pause",
        "/api/v1/consumers/{consumer}/resume",
        "/api/v1/consumers/{consumer}/replay",
        "/api/outbox",
        "/api/outbox/{event_id}/reprocess",
        "/api/v1/webhooks/subscriptions",
        "/api/v1/webhooks/subscriptions/{subscription_id}",
        "/api/v1/webhooks/subscriptions/{subscription_id}/rotate-secret",
        "/api/v1/webhooks/subscriptions/{subscription_id}/enable",
        "/api/v1/webhooks/subscriptions/{subscription_id}/disable",
        "/api/v1/webhooks/subscriptions/{subscription_id}/ping",
        "/api/v1/webhooks/deliveries",
        "/api/v1/webhooks/deliveries/{delivery_id}",
        "/api/v1/webhooks/deliveries/{delivery_id}/resend",
        "/api/v1/lgpd/data-requests",
        "/api/v1/lgpd/data-requests/{request_id}",
        "/api/v1/lgpd/data-requests/{request_id}/export",
        "/api/v1/pipelines",
        "/api/v1/pipelines/{pipeline_id}",
        "/api/v1/pipelines/{pipeline_id}/executions",
        "/api/pipelines/{pipeline_id}/executions",
        "/api/v1/orders",
        "/api/v1/conversations",
        "/api/v1/conversations/{conversation_id}",
        "/api/v1/conversations/{conversation_id}/assign",
        "/api/v1/conversations/{conversation_id}/resolve",
        "/api/v1/conversations/{conversation_id}/reopen",
        "/api/v1/analytics/daily",
        "/api/v1/contacts",
        "/api/v1/contacts/{contact_id}",
        "/api/v1/contacts/{contact_id}/merge",
        "/api/v1/contacts/{contact_id}/block",
        "/api/v1/contacts/{contact_id}/unblock",
        "/api/v1/leads",
        "/api/v1/leads/{lead_id}",
        "/api/v1/leads/{lead_id}/stage",
        "/api/v1/leads/{lead_id}/assign",
        "/api/v1/leads/{lead_id}/won",
        "/api/v1/leads/{lead_id}/lost",
        "/api/v1/leads/{lead_id}/activities",
        "/api/v1/contacts/{contact_id}/messages",
        "/api/v1/contacts/{contact_id}/consents",
    }
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    emit = schema["paths"]["/api/v1/events"]["post"]
    assert {"201", "400", "401", "403", "409", "413", "429"} <= set(emit["responses"])
    assert emit["responses"]["429"]["headers"]["Retry-After"]
    assert "Idempotency-Key" in {p["name"] for p in emit["parameters"]}


def test_the_schema_generates_without_errors_or_warnings_and_validates(tmp_path: Path) -> None:
    # Raises SchemaGenerationError on any drf-spectacular error or warning ("unable to guess
    # serializer", operationId collisions...) or when the result is not valid OpenAPI 3.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yaml"))
    assert (tmp_path / "s.yaml").read_text().startswith("openapi: 3")


def test_every_operation_is_documented_with_its_errors_and_a_unique_id() -> None:
    generator = SchemaGenerator()
    schema = generator.get_schema(request=None, public=True)
    operations = [op for item in schema["paths"].values() for op in item.values()]
    ids = [op["operationId"] for op in operations]
    assert len(ids) == len(set(ids)) and all(id_.count("_") >= 1 for id_ in ids)
    for operation in operations:
        assert operation["tags"] and operation["summary"]
        if operation.get("security") == []:
            continue  # the liveness and readiness probes: no API key, no throttle
        assert {"401", "429"} <= set(operation["responses"]), operation["operationId"]
        assert "X-Request-ID" in {p["name"] for p in operation["parameters"]}
    webhooks = {op["operationId"] for op in operations if op["tags"] == ["webhooks"]}
    assert len(webhooks) == 12 and all(id_.startswith("webhooks_") for id_ in webhooks)


def fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


def test_docs_page_loads_only_local_assets(live_server: Any) -> None:
    status, content_type, body = fetch(f"{live_server.url}/api/docs/")
    assert status == 200 and content_type.startswith("text/html")
    page = body.decode()
    assets = [urljoin(f"{live_server.url}/api/docs/", ref) for ref in ASSET.findall(page)]
    scripts = [a for a in assets if a.endswith(".js")]
    assert scripts, page
    for asset in assets:
        parts = urlsplit(asset)
        assert parts.netloc == urlsplit(live_server.url).netloc, f"external asset {asset}"
        assert fetch(asset)[0] == 200
    # The page points Swagger UI at our schema.
    assert "/api/schema/" in page
    schema_status, _, schema = fetch(f"{live_server.url}/api/schema/?format=json")
    assert schema_status == 200 and json.loads(schema)["info"]["title"]


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def each_operation(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]


def examples_of(content: dict[str, Any]) -> list[Any]:
    """The example values of a request body's or a response's media types."""
    found = []
    for media in content.values():
        if "example" in media:
            found.append(media["example"])
        found.extend(example["value"] for example in media.get("examples", {}).values())
    return found


def is_binary(content: dict[str, Any]) -> bool:
    return all(media.get("schema", {}).get("format") == "binary" for media in content.values())


def test_every_operation_shows_example_answers_and_every_body_an_example_request(
    document: dict[str, Any],
) -> None:
    operations = each_operation(document)
    assert len(operations) == 64  # 63 with an API key, and the liveness probe
    for where, operation in operations:
        answers = operation["responses"]
        assert any(examples_of(r.get("content", {})) for r in answers.values()), where
        for status, answer in answers.items():
            content = answer.get("content", {})
            if content and not is_binary(content):
                assert examples_of(content), f"{where}: {status} has no example"
        if "requestBody" in operation:
            assert examples_of(operation["requestBody"]["content"]), f"{where}: no request example"


def as_json_schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema as JSON Schema: `nullable` becomes a null alternative."""
    if isinstance(node, list):
        return [as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {
        key: as_json_schema(value)
        for key, value in node.items()
        if key not in ("nullable", "readOnly", "writeOnly", "example", "discriminator")
    }
    return {"anyOf": [converted, {"type": "null"}]} if node.get("nullable") else converted


def test_every_example_is_what_its_schema_says(document: dict[str, Any]) -> None:
    """Hand-written examples drift: each one is validated against the schema it illustrates."""
    components = as_json_schema(document["components"])
    checked = 0
    for where, operation in each_operation(document):
        bodies = [("request", operation.get("requestBody", {}).get("content", {}))]
        bodies += [(status, r.get("content", {})) for status, r in operation["responses"].items()]
        for what, content in bodies:
            for media in content.values():
                schema = {"allOf": [as_json_schema(media["schema"])], "components": components}
                validator = jsonschema.Draft202012Validator(schema)
                for value in examples_of({"media": media}):
                    problems = [e.message for e in validator.iter_errors(value)]
                    assert not problems, f"{where} {what}: {problems}"
                    checked += 1
    assert checked > 80


INTERNAL = ("initial_data", "strictserializer", "serializer", "mixin", "drf", "seed 0")


def texts(node: Any) -> list[str]:
    """Every description, summary and title in the document."""
    if isinstance(node, list):
        return [text for item in node for text in texts(item)]
    if not isinstance(node, dict):
        return []
    own = [
        str(node[k]) for k in ("description", "summary", "title") if isinstance(node.get(k), str)
    ]
    return own + [text for value in node.values() for text in texts(value)]


def test_no_developer_notes_leak_into_the_reference(document: dict[str, Any]) -> None:
    for text in texts(document):
        lowered = text.lower()
        assert not [word for word in INTERNAL if word in lowered], text
    assert "description" not in document["components"]["schemas"]["CustomerRequest"]


def test_replay_documents_its_403_and_every_error_has_an_example(
    document: dict[str, Any],
) -> None:
    replay = document["paths"]["/api/v1/consumers/{consumer}/replay"]["post"]
    [refused] = examples_of(replay["responses"]["403"]["content"])
    assert refused["error"]["code"] == "permission_denied"
    assert "consumers:replay" in refused["error"]["message"]
    for where, operation in each_operation(document):
        for status, answer in operation["responses"].items():
            if status >= "400" and status != "503":
                [example] = examples_of(answer["content"])
                assert set(example["error"]) == {"code", "message", "fields", "request_id"}, where


def test_the_reference_says_how_to_get_an_api_key_and_lists_the_scopes(
    document: dict[str, Any],
) -> None:
    description = document["info"]["description"]
    assert "## Getting an API key" in description
    assert "python manage.py create_api_key --organization" in description
    assert "--scopes events:read events:write" in description
    for name in scopes.declared():
        assert f"| `{name}` |" in description, name
