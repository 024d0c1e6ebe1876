"""Event type pattern and catalog validation."""

from __future__ import annotations

import datetime as dt

import pytest

from eventbus.store import catalog
from eventbus.store.errors import EventValidationError


@pytest.mark.parametrize("name", ["lead.created", "lead_activity.recorded", "a.b", "x1.y_2"])
def test_valid_event_types(name: str) -> None:
    assert catalog.validate_event_type(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "Lead.created",
        "lead",
        "lead.",
        ".created",
        "lead.stage-changed",
        "lead.created.x",
        "1lead.created",
        "lead.Created",
        "order.orderConfirmed",
        "",
        None,
        42,
        "lead .created",
    ],
)
def test_invalid_event_types(name: object) -> None:
    with pytest.raises(EventValidationError, match="invalid event type"):
        catalog.validate_event_type(name)


def test_seed_catalog_is_declared() -> None:
    for name in [
        "lead.stage_changed",
        "message.received",
        "ai.handoff_triggered",
        "lgpd.data_request_received",
        "webhook.subscription_disabled",
        "nuvemshop.order_paid",
        "system.send_blocked",
        "contact.anonymized",
    ]:
        assert catalog.is_declared(name)
    assert catalog.latest("lead.stage_changed").required == ("from_stage_id", "to_stage_id")


def test_missing_required_fields_are_named() -> None:
    schema = catalog.latest("lead.stage_changed")
    with pytest.raises(EventValidationError, match="missing required field.*to_stage_id"):
        catalog.check_payload(schema, {"from_stage_id": "a"})


def test_unknown_type_is_rejected() -> None:
    with pytest.raises(EventValidationError, match="unknown event type 'lead.teleported'"):
        catalog.latest("lead.teleported")


def test_old_version_is_supported_for_thirty_days() -> None:
    superseded = dt.date(2026, 1, 1)
    catalog.declare("versioned.thing", version=1, required=["a"], superseded_on=superseded)
    catalog.declare("versioned.thing", version=2, required=["a", "b"])
    assert catalog.schema_for("versioned.thing", None, superseded).version == 2
    assert catalog.schema_for("versioned.thing", 1, dt.date(2026, 1, 31)).version == 1
    with pytest.raises(EventValidationError, match="support window is over"):
        catalog.schema_for("versioned.thing", 1, dt.date(2026, 2, 1))
    with pytest.raises(EventValidationError, match="no schema version 3"):
        catalog.schema_for("versioned.thing", 3, superseded)


def test_redeclaring_differently_is_an_error() -> None:
    catalog.declare("stable.thing", required=["a"])
    catalog.declare("stable.thing", required=["a"])  # identical: fine (module reloads)
    with pytest.raises(EventValidationError, match="already declared differently"):
        catalog.declare("stable.thing", required=["b"])
