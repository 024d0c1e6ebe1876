"""One error shape for every failure the API can answer with, each with its status and headers."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest
from django.test.utils import override_settings
from rest_framework.test import APIClient

from core import services
from core.models import ApiKey, Organization
from eventbus.operations import selectors
from eventbus.store.models import EventLog
from tests.support.api import api_client, client_for, error_of, issue_key, lead_stage_changed

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/events"


def test_400_validation_error_lists_fields(org: Organization) -> None:
    response = api_client(org).post(EVENTS, {"entity_kind": ["lead"]}, format="json")
    error = error_of(response, 400, "validation_error")
    assert set(error["fields"]) == {"event_type", "entity_kind"}


@pytest.mark.parametrize(
    "raw",
    [b"{not json", b"[" * 50_000 + b"]" * 50_000, b'{"event_type": "\\ud800"}', b"NaN"],
)
def test_400_parse_error_for_bodies_that_are_not_json(org: Organization, raw: bytes) -> None:
    response = api_client(org).post(EVENTS, raw, content_type="application/json")
    error_of(response, 400, "parse_error")
    assert not EventLog.objects.exists()


def test_400_for_a_json_body_that_is_not_an_object(org: Organization) -> None:
    response = api_client(org).post(EVENTS, [1, 2], format="json")
    assert "non_field_errors" in error_of(response, 400, "validation_error")["fields"]


def test_401_without_a_key_says_how_to_authenticate(org: Organization) -> None:
    response = APIClient().get(EVENTS)
    error_of(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"].startswith("Bearer")
    # Another scheme is no key either.
    error_of(
        client_for(HTTP_AUTHORIZATION="Basic dXNlcjpwdw==").get(EVENTS), 401, "not_authenticated"
    )


@pytest.mark.parametrize(
    "header",
    [
        "Bearer ",
        "Bearer dck_nope",
        "Bearer dck_0123456789ab_" + "A" * 43,
        "Bearer dck_ünïcode",
        "bearer " + "x" * 5000,
    ],
)
def test_401_for_invalid_keys(org: Organization, header: str) -> None:
    issue_key(org)
    response = client_for(HTTP_AUTHORIZATION=header).get(EVENTS)
    error_of(response, 401, "authentication_failed")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_401_for_a_revoked_key_at_once(org: Organization) -> None:
    token = issue_key(org)
    client = client_for(token)
    assert client.get(EVENTS).status_code == 200
    services.api_key_revoke(api_key=ApiKey.objects.get(), actor="test")
    assert "revoked" in error_of(client.get(EVENTS), 401, "authentication_failed")["message"]


def test_a_tampered_secret_with_a_real_prefix_is_rejected(org: Organization) -> None:
    token = issue_key(org)
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    error_of(client_for(tampered).get(EVENTS), 401, "authentication_failed")


def test_403_names_the_missing_scope(org: Organization) -> None:
    client = api_client(org, "events:read")
    error = error_of(
        client.post(EVENTS, lead_stage_changed(), format="json"), 403, "permission_denied"
    )
    assert "events:write" in error["message"]
    assert not EventLog.objects.exists()


def test_404_for_paths_that_name_no_endpoint(org: Organization) -> None:
    client = api_client(org)
    for path in (
        "/api/v1/nothing",
        "/api/v1/events/",
        "/api/v2/events",
        f"{EVENTS}/{uuid.uuid4()}",
    ):
        error_of(client.get(path), 404, "not_found")


def test_405_for_unmapped_methods(org: Organization) -> None:
    client = api_client(org)
    response = client.delete(EVENTS)
    error_of(response, 405, "method_not_allowed")
    assert set(response["Allow"].replace(" ", "").split(",")) >= {"GET", "POST"}
    error_of(client.options(EVENTS), 405, "method_not_allowed")
    error_of(client.get(f"{EVENTS}/{uuid.uuid4()}/reprocess"), 405, "method_not_allowed")


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_413_for_a_body_over_the_limit_and_nothing_written(org: Organization) -> None:
    client = api_client(org)
    small = lead_stage_changed(payload={"from_stage_id": "a", "to_stage_id": "b", "x": "y" * 100})
    assert client.post(EVENTS, small, format="json").status_code == 201
    big = lead_stage_changed(payload={"from_stage_id": "a", "to_stage_id": "b", "x": "y" * 3000})
    error_of(client.post(EVENTS, big, format="json"), 413, "payload_too_large")
    assert EventLog.objects.count() == 1


def chunked(client: Any, path: str, body: bytes) -> Any:
    """POST `body` as gunicorn hands a chunked request over: de-chunked, no Content-Length."""
    return client.generic(
        "POST",
        path,
        content_type="application/json",
        CONTENT_LENGTH="",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(body), "wsgi.input_terminated": True},
    )


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2000)
def test_a_chunked_body_is_held_to_the_same_limit(org: Organization) -> None:
    client = api_client(org)
    small = json.dumps(lead_stage_changed()).encode()
    assert chunked(client, EVENTS, small).status_code == 201
    big = json.dumps(lead_stage_changed(payload={"x": "y" * 3000})).encode()
    error_of(chunked(client, EVENTS, big), 413, "payload_too_large")
    assert EventLog.objects.count() == 1


def test_400_for_an_event_payload_over_the_bus_limit(org: Organization) -> None:
    huge = lead_stage_changed(
        payload={"from_stage_id": "a", "to_stage_id": "b", "x": "y" * 300_000}
    )
    response = api_client(org).post(EVENTS, huge, format="json")
    assert "262144" in error_of(response, 400, "validation_error")["fields"]["payload"][0]


def test_415_for_bodies_that_are_not_json(org: Organization) -> None:
    response = api_client(org).post(EVENTS, "event_type=x", content_type="text/plain")
    error_of(response, 415, "unsupported_media_type")


def test_500_keeps_the_shape_and_says_nothing_about_internals(
    org: Organization, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(**kwargs: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(selectors, "events_page", broken)
    response = api_client(org).get(EVENTS)
    error = error_of(response, 500, "server_error")
    assert "secret" not in response.content.decode()
    assert error["request_id"]


def test_disallowed_host_under_api_is_a_json_400(org: Organization) -> None:
    response = APIClient().get(EVENTS, HTTP_HOST="evil.example")
    error_of(response, 400, "bad_request")
