"""The API reference reads for integrators: every operation says what it does and which scope it
needs, in its own words (no base-class docstring), v1 first, with the health probes."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import Resolver404, resolve
from drf_spectacular.generators import SchemaGenerator

pytestmark = pytest.mark.django_db

JARGON = ("seed 0", "->", "required_scopes", "Subclasses", "Base of the views", "`<uuid:")
PROBES = {"/api/ping", "/api/v1/health"}


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]


def view_class(path: str) -> Any:
    """The view class serving a documented path (placeholders filled with a sample id)."""
    for sample in ("00000000-0000-0000-0000-000000000001", "1"):
        try:
            match = resolve(re.sub(r"\{[^}]+\}", sample, path))
        except Resolver404:
            continue
        found = getattr(match.func, "cls", None)  # None: the API's catch-all 404
        if found is not None:
            return found
    raise AssertionError(f"{path} resolves to no view")


def base_class_texts(cls: Any) -> list[str]:
    """The first line of every docstring the view inherits (its own class excluded)."""
    docs = (base.__dict__.get("__doc__") for base in cls.__mro__[1:])
    return [doc.strip().splitlines()[0] for doc in docs if doc and doc.strip()]


def test_every_operation_has_a_summary_a_description_and_its_scope(
    schema: dict[str, Any],
) -> None:
    for path, method, operation in operations(schema):
        where = f"{method.upper()} {path}"
        assert operation.get("summary"), f"{where}: no summary"
        description = operation.get("description", "")
        prose = re.sub(r"\**(Required scope|Scope):?\**:?.*", "", description, flags=re.S)
        assert len(prose.strip()) >= 40, f"{where}: no description beyond the scope"
        if path in PROBES:
            assert operation["security"] == [], f"{where}: a probe needs no API key"
            continue
        scopes = getattr(view_class(path), "required_scopes", {})
        needed = scopes.get(method.upper()) or _webhook_scope(path, method)
        assert needed and f"`{needed}`" in description, f"{where}: scope {needed!r} not stated"


def _webhook_scope(path: str, method: str) -> str | None:
    # Webhook views check read/write by method (ReadOrWriteScope), not by `required_scopes`.
    if "/webhooks/" not in path:
        return None
    return "webhooks:read" if method == "get" else "webhooks:write"


def test_no_operation_shows_base_class_text_or_internal_jargon(schema: dict[str, Any]) -> None:
    for path, method, operation in operations(schema):
        text = f"{operation.get('summary', '')}\n{operation.get('description', '')}"
        inherited = [] if path in PROBES else base_class_texts(view_class(path))
        for phrase in (*JARGON, *inherited):
            assert phrase not in text, f"{method.upper()} {path} says {phrase!r}"


def test_probes_first_then_v1_before_the_legacy_outbox(schema: dict[str, Any]) -> None:
    paths = list(schema["paths"])
    assert set(paths[:2]) == PROBES
    rest = paths[2:]
    first_outbox = min(i for i, p in enumerate(rest) if p.startswith("/api/outbox"))
    assert all(p.startswith("/api/v1/") for p in rest[:first_outbox])
    assert [t["name"] for t in schema["tags"]][:2] == ["health", "v1"]


def test_the_probe_operations_describe_their_answers(schema: dict[str, Any]) -> None:
    health = schema["paths"]["/api/v1/health"]["get"]
    assert {"200", "503"} <= set(health["responses"])
    assert schema["paths"]["/api/ping"]["get"]["responses"]["200"]


@pytest.mark.parametrize("path", sorted(PROBES))
def test_the_probes_refuse_other_methods_with_405_and_allow(path: str) -> None:
    response = Client().generic("QUERY", path)
    assert response.status_code == 405 and "GET" in response["Allow"]
