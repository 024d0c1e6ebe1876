"""/api/schema/ (OpenAPI 3) and /api/docs/ (Swagger UI from our own static files, no CDN)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

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
