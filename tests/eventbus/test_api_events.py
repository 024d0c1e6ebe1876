"""/api/v1/events: emit, list (filters, cursor pages), detail, reprocess, discard."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

import eventbus
from core.models import AuditLog, Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from tests.eventbus.test_services import dead_flaky
from tests.support.api import (
    api_client,
    client_for,
    error_of,
    issue_key,
    lead_stage_changed,
    prefix_of,
)

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/events"


def test_emit_returns_201_and_writes_the_event_for_the_keys_organization(
    org: Organization, org_b: Organization
) -> None:
    token = issue_key(org, "events:write")
    client = client_for(token, HTTP_X_REQUEST_ID="req-emit-1")
    body = {**lead_stage_changed(), "entity_id": str(uuid.UUID(int=5)), "metadata": {"k": "v"}}
    response = client.post(EVENTS, body, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    event = EventLog.objects.get(pk=created["id"])
    assert event.organization_id == org.pk
    assert (event.event_type, event.entity_kind, str(event.entity_id)) == (
        "lead.stage_changed",
        "lead",
        str(uuid.UUID(int=5)),
    )
    prefix = prefix_of(token)
    assert event.metadata["k"] == "v"
    assert event.metadata["request_id"] == "req-emit-1"
    assert event.metadata["actor_id"] == f"api_key:{prefix}"
    assert event.metadata["source"] == "api"
    assert created["metadata"] == event.metadata
    assert created["status"] == event.status


def test_the_organization_never_comes_from_the_body(org: Organization, org_b: Organization) -> None:
    client = api_client(org, "events:write")
    response = client.post(EVENTS, lead_stage_changed(organization=str(org_b.pk)), format="json")
    error = error_of(response, 400, "validation_error")
    assert error["fields"] == {"organization": ["Unknown field."]}
    assert not EventLog.objects.exists()


@pytest.mark.parametrize(
    ("change", "field", "fragment"),
    [
        ({"event_type": "Lead.Created"}, "event_type", "does not match"),
        ({"event_type": "lead.teleported"}, "event_type", "unknown event type"),
        ({"payload": {}}, "payload", "missing required field"),
        ({"payload": "text"}, "payload", "dictionary"),
        ({"payload": {"from_stage_id": 1, "to_stage_id": "\x00"}}, "payload", "NUL"),
        ({"entity_kind": ""}, "entity_kind", "blank"),
        ({"entity_kind": 7}, "entity_kind", "Not a valid string"),
        ({"entity_id": "nope"}, "entity_id", "UUID"),
        ({"metadata": {"request_id": "spoof"}}, "metadata", "set by the server"),
        ({"metadata": {"schema_version": 9}}, "metadata.schema_version", "no schema version 9"),
        ({"metadata": {"idempotency_key": ""}}, "metadata.idempotency_key", "idempotency_key"),
        ({"typo": 1}, "typo", "Unknown field"),
    ],
)
def test_emit_rejects_bad_input_field_by_field_and_writes_nothing(
    org: Organization, change: dict[str, object], field: str, fragment: str
) -> None:
    response = api_client(org, "events:write").post(
        EVENTS, {**lead_stage_changed(), **change}, format="json"
    )
    error = error_of(response, 400, "validation_error")
    assert list(error["fields"]) == [field]
    assert fragment in error["fields"][field][0]
    assert not EventLog.objects.exists()


def deep_json(levels: int) -> str:
    """JSON text of an object `levels` deep (built as text: too deep for json.dumps)."""
    return '{"d":' * (levels - 1) + "{}" + "}" * (levels - 1)


def raw_emit_body(*, entity_kind: str = "lead", payload: str = "", metadata: str = "") -> str:
    """A lead.stage_changed body as JSON text, with `payload` / `metadata` members added (text,
    so it can hold what json.dumps would not write: lone surrogate escapes, 10,000 levels)."""
    stages = '"from_stage_id":"new","to_stage_id":"qualified"'
    return (
        f'{{"event_type":"lead.stage_changed","entity_kind":"{entity_kind}",'
        f'"payload":{{{stages}{payload}}},"metadata":{{{metadata}}}}}'
    )


@pytest.mark.parametrize("idempotency_key", [None, "retry-1"])
@pytest.mark.parametrize(
    ("body", "code", "field", "fragment"),
    [
        (raw_emit_body(entity_kind="le\\u0000ad"), "validation_error", "entity_kind", "Null"),
        (raw_emit_body(entity_kind="le\\ud800ad"), "parse_error", None, "surrogate"),
        (raw_emit_body(payload=',"\\u0000":1'), "validation_error", "payload", "NUL"),
        (raw_emit_body(payload=',"\\udfff":1'), "parse_error", None, "surrogate"),
        (raw_emit_body(payload=f',"d":{deep_json(40)}'), "validation_error", "payload", "nested"),
        (raw_emit_body(payload=f',"d":{deep_json(10_000)}'), "parse_error", None, "too deeply"),
        (raw_emit_body(metadata=f'"x":"{"v" * 9000}"'), "validation_error", "metadata", "8192"),
        (raw_emit_body(metadata='"k\\u0000":"v"'), "validation_error", "metadata", "NUL"),
        (raw_emit_body(metadata=f'"x":{deep_json(40)}'), "validation_error", "metadata", "nested"),
        (
            raw_emit_body(metadata='"idempotency_key":"k\\u0000"'),
            "validation_error",
            "metadata.idempotency_key",
            "NUL",
        ),
    ],
)
def test_emit_refuses_what_postgresql_cannot_store_with_a_400(
    org: Organization,
    body: str,
    code: str,
    field: str | None,
    fragment: str,
    idempotency_key: str | None,
) -> None:
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key else {}
    client = api_client(org, "events:write")
    response = client.post(EVENTS, body, content_type="application/json", **headers)
    error = error_of(response, 400, code)
    if field is None:
        assert fragment in error["message"]
    else:
        assert list(error["fields"]) == [field]
        assert fragment in error["fields"][field][0]
    assert not EventLog.objects.exists()


@pytest.mark.parametrize("idempotency_key", [None, "retry-1"])
@pytest.mark.parametrize("levels", [33, 500, 900, 950, 990, 1200])
def test_emit_nested_past_the_limit_is_a_400_at_any_depth(
    org: Organization, levels: int, idempotency_key: str | None
) -> None:
    # Around Python's recursion limit (1000) the parser, the idempotency hash and the emit each
    # have their own chance to fail: every one of them must end in a 400, never a 500.
    headers = {"HTTP_IDEMPOTENCY_KEY": idempotency_key} if idempotency_key else {}
    body = raw_emit_body(payload=f',"d":{deep_json(levels)}')
    client = api_client(org, "events:write")
    response = client.post(EVENTS, body, content_type="application/json", **headers)
    assert response.status_code == 400, response.content[:300]
    assert not EventLog.objects.exists()


def test_emit_with_metadata_idempotency_key_yields_the_same_event(org: Organization) -> None:
    client = api_client(org, "events:write")
    body = lead_stage_changed(metadata={"idempotency_key": "erp-order-7"})
    first = client.post(EVENTS, body, format="json").json()
    second = client.post(EVENTS, body, format="json").json()
    assert first["id"] == second["id"]
    assert EventLog.objects.count() == 1


def make_events(org: Organization, count: int, **kwargs: object) -> list[uuid.UUID]:
    items = [
        {"event_type": "test.effect", "entity_kind": "thing", "payload": {"n": i}, **kwargs}
        for i in range(count)
    ]
    return eventbus.emit_many(items, organization=org)


def test_list_walks_every_event_once_newest_first_across_pages(org: Organization) -> None:
    # Two batches with one created_at each: ties on created_at are broken by id.
    with time_machine.travel(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), tick=False):
        older = make_events(org, 4)
    with time_machine.travel(dt.datetime(2026, 1, 2, tzinfo=dt.UTC), tick=False):
        newer = make_events(org, 3)
    client = api_client(org, "events:read")
    seen: list[str] = []
    url: str | None = f"{EVENTS}?limit=2"
    pages = 0
    while url:
        body = client.get(url).json()
        seen += [item["id"] for item in body["results"]]
        url = body["next"]
        pages += 1
    assert pages == 4
    expected = sorted(map(str, newer), reverse=True) + sorted(map(str, older), reverse=True)
    assert seen == expected


def test_list_filters(org: Organization) -> None:
    entity = uuid.uuid4()
    with time_machine.travel(dt.datetime(2026, 3, 1, tzinfo=dt.UTC), tick=False):
        march = make_events(org, 1, entity_id=entity)
    make_events(org, 2)
    eventbus.emit(
        "lead.won", organization=org, entity_kind="lead", payload={"value": 1, "won_at": 1}
    )
    client = api_client(org, "events:read")

    def ids(query: str) -> set[str]:
        response = client.get(f"{EVENTS}?{query}")
        assert response.status_code == 200, response.content
        return {item["id"] for item in response.json()["results"]}

    assert len(ids("event_type=test.effect")) == 3
    assert len(ids("entity_kind=lead")) == 1
    assert ids(f"entity_id={entity}") == {str(march[0])}
    assert ids("created_before=2026-03-02T00:00:00Z") == {str(march[0])}
    assert len(ids("created_after=2026-03-02T00:00:00Z")) == 3
    assert len(ids("status=done")) == 1  # lead.won has no consumer here
    assert len(ids("consumer=effect-b-worker")) == 3
    assert ids("consumer=nobody-worker") == set()


def test_list_never_counts_and_costs_a_bounded_number_of_queries(org: Organization) -> None:
    make_events(org, 30)
    client = api_client(org, "events:read")
    with CaptureQueriesContext(connection) as queries:
        assert client.get(f"{EVENTS}?limit=10").status_code == 200
    sql = [q["sql"].lower() for q in queries.captured_queries]
    assert not [s for s in sql if "count(" in s]
    # key lookup (which also scopes the session to the key's tenant), last_used, throttle, the
    # page, and the session's row-level-security scope put back after the response (core.rls)
    assert len(sql) <= 5, sql
    assert sql[-1].startswith("select set_config('app.organization_id', ''")


def test_list_rejects_bad_filters(org: Organization) -> None:
    client = api_client(org, "events:read")
    response = client.get(f"{EVENTS}?status=lost&entity_id=1&limit=0&cursor=@@&foo=1")
    error = error_of(response, 400, "validation_error")
    assert set(error["fields"]) == {"status", "entity_id", "limit", "cursor"}
    response = client.get(f"{EVENTS}?limit=201")
    assert "At most 200" in error_of(response, 400, "validation_error")["fields"]["limit"][0]
    assert error_of(client.get(f"{EVENTS}?foo=1"), 400, "validation_error")["fields"] == {
        "foo": ["Unknown field."]
    }


def test_detail_shows_each_consumers_state(org: Organization) -> None:
    (event_id,) = make_events(org, 1)
    Delivery.objects.filter(consumer="effect-a-worker").update(status="dead", last_error="boom")
    body = api_client(org, "events:read").get(f"{EVENTS}/{event_id}").json()
    assert body["id"] == str(event_id)
    states = {d["consumer"]: (d["status"], d["last_error"]) for d in body["deliveries"]}
    assert states == {
        "effect-a-worker": ("dead", "boom"),
        "effect-b-worker": ("pending", None),
        "effect-c-worker": ("pending", None),
    }


def test_unknown_or_malformed_ids_are_404_in_the_error_shape(org: Organization) -> None:
    client = api_client(org)
    error_of(client.get(f"{EVENTS}/{uuid.uuid4()}"), 404, "not_found")
    error_of(client.get(f"{EVENTS}/not-a-uuid"), 404, "not_found")
    error_of(client.post(f"{EVENTS}/{uuid.uuid4()}/reprocess", {}, format="json"), 404, "not_found")


def test_reprocess_puts_dead_deliveries_back_and_audits_with_the_key(org: Organization) -> None:
    (dead,) = dead_flaky(org)
    token = issue_key(org, "events:reprocess")
    client = client_for(token, HTTP_X_REQUEST_ID="req-reprocess")
    response = client.post(
        f"{EVENTS}/{dead.event_id}/reprocess", {"reason": "fixed the bug"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["moved"] == 1
    assert [(d["consumer"], d["status"], d["attempts"]) for d in body["event"]["deliveries"]] == [
        ("flaky-worker", "pending", 0)
    ]
    entry = AuditLog.objects.get(action="delivery.reprocess")
    assert entry.actor == f"api_key:{prefix_of(token)}"
    assert (entry.request_id, entry.reason, entry.organization_id) == (
        "req-reprocess",
        "fixed the bug",
        org.pk,
    )
    # Nothing dead any more: a second call is a conflict, and changes nothing.
    error_of(client.post(f"{EVENTS}/{dead.event_id}/reprocess"), 409, "invalid_state")
    assert AuditLog.objects.filter(action="delivery.reprocess").count() == 1


def test_reprocess_one_consumer_reruns_a_done_delivery_only(
    org: Organization, side_effects: None
) -> None:
    (event_id,) = make_events(org, 1)
    worker = Worker(WorkerOptions(consumers=["effect-a-worker"], listen=False))
    while worker.run_once():
        pass
    client = api_client(org, "events:reprocess")
    url = f"{EVENTS}/{event_id}/reprocess"
    response = client.post(url, {"consumer": "effect-a-worker"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["moved"] == 1
    assert Delivery.objects.get(consumer="effect-a-worker").status == "pending"
    error = error_of(
        client.post(url, {"consumer": "nobody-worker"}, format="json"), 400, "validation_error"
    )
    assert "no delivery for consumer" in error["fields"]["consumer"][0]
    # Without a consumer only dead deliveries move: there are none.
    error_of(client.post(url, {}, format="json"), 409, "invalid_state")


def test_discard_requires_a_reason_and_audits_it(org: Organization) -> None:
    (dead,) = dead_flaky(org)
    client = api_client(org, "events:discard")
    url = f"{EVENTS}/{dead.event_id}/discard"
    error = error_of(client.post(url, {}, format="json"), 400, "validation_error")
    assert set(error["fields"]) == {"reason"}
    error_of(client.post(url, {"reason": ""}, format="json"), 400, "validation_error")
    error_of(client.post(url, {"reason": 0}, format="json"), 400, "validation_error")
    dead.refresh_from_db()
    assert dead.status == "dead"
    response = client.post(url, {"reason": "customer gone"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["moved"] == 1
    assert response.json()["event"]["status"] == "done"
    entry = AuditLog.objects.get(action="delivery.discard")
    assert entry.reason == "customer gone"
    error_of(client.post(url, {"reason": "again"}, format="json"), 409, "invalid_state")


def test_an_api_emit_may_set_its_ordering_key_and_priority(org: Organization) -> None:
    client = api_client(org, "events:write")
    body = {**lead_stage_changed(), "ordering_key": "lead:7", "priority": 6}
    response = client.post(EVENTS, body, format="json")
    assert response.status_code == 201, response.content
    assert (response.json()["ordering_key"], response.json()["priority"]) == ("lead:7", 6)
    event = EventLog.objects.get(pk=response.json()["id"])
    assert (event.ordering_key, event.priority) == ("lead:7", 6)
    for field, bad in (("priority", 11), ("priority", "high"), ("ordering_key", 5)):
        response = client.post(EVENTS, {**body, field: bad}, format="json")
        error = error_of(response, 400, "validation_error")
        assert field in error["fields"], error
    assert EventLog.objects.count() == 1
