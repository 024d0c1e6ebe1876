"""Event ownership: every type has an owner and doors; the API and pipelines admit only what its
owner opened to them, the bus records who produced each event, and `GET /api/v1/event-types`
tells an integrator what it may emit."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.test import override_settings

import eventbus
from core.models import Organization
from eventbus.store import catalog
from eventbus.store.errors import EmitRateLimited, EventTypeNotEmittable
from eventbus.store.models import EventLog
from eventbus.store.provenance import Provenance
from pipelines.definition import DefinitionError, parse
from tests.support.api import api_client, client_for, error_of, issue_key, prefix_of, snapshot

pytestmark = pytest.mark.django_db

EVENTS = "/api/v1/events"
EVENT_TYPES = "/api/v1/event-types"


def body_for(event_type: str) -> dict[str, Any]:
    """A valid body of the type's latest version (each required field set)."""
    required = catalog.latest(event_type).required
    return {
        "event_type": event_type,
        "entity_kind": "thing",
        "payload": dict.fromkeys(required, "x"),
    }


def emit_pipeline(event_type: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "start", "type": "start"},
            {"id": "shout", "type": "emit-event", "config": {"eventType": event_type}},
        ],
        "edges": [{"from": "start", "to": "shout"}],
    }


# -- the catalog ------------------------------------------------------------------------------


def test_every_type_has_an_owner_and_the_platforms_commands_are_open_to_no_door() -> None:
    for name in catalog.declared_types():
        assert catalog.owner_of(name), name
        assert catalog.APP in catalog.doors_of(name)
    owners = {name: catalog.owner_of(name) for name in catalog.declared_types()}
    assert owners["message.queued"] == "crm"
    assert owners["nuvemshop.store_redact_received"] == "nuvemshop"
    assert owners["lgpd.data_request_received"] == "lgpd"
    assert owners["cron.started"] == "system"
    # The attacks of issue 38: commands and facts only their owner may state.
    for name in (
        "nuvemshop.store_redact_received",
        "nuvemshop.full_resync",
        "nuvemshop.sync_page",
        "nuvemshop.store_connected",
        "nuvemshop.webhook_received",
        "nuvemshop.shop_redact_requested",
        "nuvemshop.customer_redact_received",
        "nuvemshop.customer_data_requested",
        "nuvemshop.order_paid",
        "message.queued",
        "lgpd.redact_applied",
        "lgpd.data_request_received",
        "webhook.subscription_disabled",
        "webhook.ping",
        "order.confirmed",
    ):
        assert catalog.doors_of(name) == {catalog.APP}, name
    assert catalog.doors_of("lead.stage_changed") == {catalog.APP, catalog.API, catalog.PIPELINE}


def test_a_declaration_refuses_another_owner_and_unknown_doors() -> None:
    with pytest.raises(eventbus.EventValidationError, match="owned by crm"):
        catalog.declare("lead.created", required=("name",), owner="ai")
    with pytest.raises(eventbus.EventValidationError, match="unknown door"):
        catalog.declare("ownership.thing", doors=["email"])
    assert not catalog.is_declared("ownership.thing")


# -- the API door -----------------------------------------------------------------------------


def test_the_whole_catalog_at_the_api_door(org: Organization) -> None:
    """Every type not open to the API is a 403 naming it and its owner, writing nothing; every
    open one is accepted."""
    client = api_client(org, "events:write")
    for name in catalog.declared_types():
        before = EventLog.objects.count()
        response = client.post(EVENTS, body_for(name), format="json")
        if catalog.emittable(name, catalog.API):
            assert response.status_code == 201, (name, response.content)
            assert EventLog.objects.count() == before + 1
            continue
        error = error_of(response, 403, "event_type_not_emittable")
        assert name in error["message"] and catalog.owner_of(name) in error["message"], error
        assert EventLog.objects.count() == before, name


def test_a_refused_type_changes_nothing_at_all(org: Organization) -> None:
    client = api_client(org, "events:write")
    before = snapshot()
    response = client.post(EVENTS, body_for("nuvemshop.order_paid"), format="json")
    error = error_of(response, 403, "event_type_not_emittable")
    assert "nuvemshop.order_paid is owned by nuvemshop" in error["message"]
    assert snapshot() == before


def test_the_metadata_the_bus_writes_cannot_come_from_the_body(org: Organization) -> None:
    client = api_client(org, "events:write")
    for key in ("provenance", "causation_id", "causation_depth", "pipelines"):
        body = {**body_for("lead.created"), "metadata": {key: "forged"}}
        error = error_of(client.post(EVENTS, body, format="json"), 400, "validation_error")
        assert "metadata" in error["fields"], error
    assert not EventLog.objects.exists()


def test_an_api_event_says_which_key_produced_it(org: Organization) -> None:
    token = issue_key(org, "events:write", "events:read")
    client = client_for(token)
    response = client.post(EVENTS, body_for("lead.won"), format="json")
    assert response.status_code == 201, response.content
    expected = {"door": "api", "producer": f"api_key:{prefix_of(token)}"}
    assert response.json()["provenance"] == expected
    event = EventLog.objects.get(pk=response.json()["id"])
    assert event.provenance == expected and "causation_depth" not in event.metadata
    listed = client.get(EVENTS).json()["results"]
    assert listed[0]["provenance"] == expected


def test_emits_through_the_api_count_against_the_organizations_door_rate(
    org: Organization, org_b: Organization
) -> None:
    client = api_client(org, "events:write")
    with override_settings(EVENTBUS={"DOOR_EMIT_RATE": "2/minute"}):
        for _ in range(2):
            assert client.post(EVENTS, body_for("lead.won"), format="json").status_code == 201
        # The app's own emits are not counted.
        eventbus.emit(
            "lead.won",
            organization=org,
            entity_kind="lead",
            payload=body_for("lead.won")["payload"],
        )
        refused = client.post(EVENTS, body_for("lead.won"), format="json")
        error = error_of(refused, 429, "throttled")
        assert "2/minute" in error["message"]
        assert int(refused["Retry-After"]) >= 1
        assert EventLog.objects.filter(organization=org).count() == 3
        # Per organization: another tenant has its own allowance.
        other = api_client(org_b, "events:write")
        assert other.post(EVENTS, body_for("lead.won"), format="json").status_code == 201


def test_emit_many_through_a_door_refuses_the_whole_batch_naming_the_item(
    org: Organization,
) -> None:
    items = [
        {"event_type": "lead.won", "entity_kind": "lead", "payload": {"value": 1, "won_at": "x"}},
        {"event_type": "message.queued", "entity_kind": "message", "payload": {}},
    ]
    with pytest.raises(EventTypeNotEmittable, match=r"item 1: message.queued is owned by crm"):
        eventbus.emit_many(items, organization=org, provenance=Provenance.api_key("dck_x"))
    assert not EventLog.objects.exists()
    with override_settings(EVENTBUS={"DOOR_EMIT_RATE": "1/minute"}), pytest.raises(EmitRateLimited):
        eventbus.emit_many(
            [items[0], items[0]], organization=org, provenance=Provenance.api_key("dck_x")
        )
    assert not EventLog.objects.exists()
    # The app's own code is never refused at a door.
    assert (
        len(
            eventbus.emit_many(
                [
                    *items[:1],
                    {
                        **items[1],
                        "payload": {
                            "message_id": "m",
                            "conversation_id": "c",
                            "contact_id": "k",
                            "channel": "whatsapp",
                        },
                    },
                ],
                organization=org,
            )
        )
        == 2
    )


# -- the pipeline door ------------------------------------------------------------------------


def test_the_whole_catalog_at_the_pipeline_door() -> None:
    for name in catalog.declared_types():
        if catalog.emittable(name, catalog.PIPELINE):
            parse(emit_pipeline(name))
            continue
        with pytest.raises(DefinitionError) as raised:
            parse(emit_pipeline(name))
        [problem] = raised.value.problems
        assert problem.node == "shout", name
        assert "not open to pipelines" in problem.message and name in problem.message


def test_a_pipeline_definition_with_a_closed_type_is_a_400_naming_the_node(
    org: Organization,
) -> None:
    client = api_client(org)
    body = {
        "name": "wipe",
        "trigger": "order.post",
        "definition": emit_pipeline("lgpd.redact_applied"),
    }
    error = error_of(client.post("/api/v1/pipelines", body, format="json"), 400, "validation_error")
    assert any("shout" in field for field in error["fields"]), error
    assert "owned by lgpd" in str(error["fields"])


# -- provenance of the app's own events -------------------------------------------------------


def test_the_apps_own_events_name_the_app_and_its_component(org: Organization) -> None:
    event = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    assert event.provenance == {
        "door": "app",
        "producer": "app:tests",
        "component": "tests.eventbus.test_ownership",
    }
    assert Provenance.system("cron:backup").as_metadata() == {
        "door": "app",
        "producer": "system",
        "component": "cron:backup",
    }
    given = eventbus.emit(
        "test.effect",
        organization=org,
        entity_kind="t",
        payload={"n": 2},
        metadata={"provenance": {"producer": "forged"}},  # the bus's key: replaced
    )
    assert given.metadata["provenance"]["producer"] == "app:tests"


# -- the catalog for integrators --------------------------------------------------------------


def test_event_types_lists_the_catalog_and_what_the_key_may_emit(org: Organization) -> None:
    writer = api_client(org, "events:read", "events:write").get(EVENT_TYPES)
    assert writer.status_code == 200, writer.content
    by_type = {t["event_type"]: t for t in writer.json()["results"]}
    assert set(by_type) == set(catalog.declared_types())
    lead = by_type["lead.stage_changed"]
    assert (lead["owner"], lead["doors"], lead["emittable"]) == (
        "crm",
        ["app", "api", "pipeline"],
        True,
    )
    assert lead["versions"][0]["payload_schema"]["required"] == ["from_stage_id", "to_stage_id"]
    assert by_type["nuvemshop.order_paid"]["emittable"] is False
    received = by_type["message.received"]
    assert [v["version"] for v in received["versions"]] == [1, 2]
    assert received["latest_version"] == 2
    # A key without events:write may read the catalog but emit nothing.
    reader = api_client(org, "events:read").get(EVENT_TYPES).json()["results"]
    assert not any(t["emittable"] for t in reader)
    assert client_for().get(EVENT_TYPES).status_code == 401
    error_of(api_client(org, "events:write").get(EVENT_TYPES), 403, "permission_denied")


def test_event_types_is_in_the_openapi_document(org: Organization) -> None:
    schema = client_for().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200, schema.content[:200]
    text = schema.content.decode()
    assert "/api/v1/event-types" in text and "event_types_list" in text


def test_a_type_nobody_declared_is_still_a_400(org: Organization) -> None:
    client = api_client(org, "events:write")
    body = {"event_type": "lead.teleported", "entity_kind": "lead", "entity_id": str(uuid.uuid4())}
    error = error_of(client.post(EVENTS, body, format="json"), 400, "validation_error")
    assert "unknown event type" in str(error["fields"])
