"""Export (R-L2): D+7, every category in the bundle, a signed link valid 30 days, idempotent."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client

from deskcomm.models import AuditLog
from eventbus.models import Delivery, EventLog
from lgpd.categories import REGISTRY
from lgpd.handlers import EXPORT_CONSUMER
from lgpd.models import DataRequest
from tests.lgpd.conftest import CPF, EMAIL, NAME, PHONE, World, drain_lgpd, request_for, run_after

pytestmark = pytest.mark.django_db


def export_at_d7(world: World, clock: time_machine.Coordinates) -> DataRequest:
    return run_after(world, clock, "access", 7)


def link_path() -> str:
    event = EventLog.objects.get(event_type="lgpd.export_generated")
    return urlsplit(event.payload["export_url_signed"]).path


def download(path: str) -> Any:
    return Client().get(path)


def test_nothing_happens_before_d7(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = request_for(world, "access")
    clock.shift(dt.timedelta(days=6, hours=23))
    assert drain_lgpd() == 0
    request.refresh_from_db()
    assert (request.status, request.export_generated_at) == ("received", None)
    assert not export_storage.exists() or not any(export_storage.rglob("*.json"))


def test_the_bundle_covers_every_category(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = export_at_d7(world, clock)
    assert request.status == "completed"
    assert request.export_generated_at - request.received_at >= dt.timedelta(days=7)
    bundle = json.loads((export_storage / request.export_name).read_text())
    sections = bundle["categories"]
    assert set(sections) == {category.name for category in REGISTRY}
    assert all(sections.values()), [name for name, rows in sections.items() if not rows]
    [contact] = sections["contact"]
    assert (contact["name"], contact["phone"], contact["email"], contact["cpf"]) == (
        NAME,
        PHONE,
        EMAIL,
        CPF,
    )
    assert "cpf_encrypted" not in contact
    assert {m["direction"] for m in sections["messages"]} == {"inbound", "outbound"}
    assert sections["orders"][0]["total_cents"] == 15990
    assert sections["consents"][0]["consent_type"] == "marketing_whatsapp"
    assert {r["record"] for r in sections["lead_activities"]} == {
        "deskcomm.Lead",
        "deskcomm.LeadActivity",
    }
    types = {e["event_type"] for e in sections["events"]}
    assert {"contact.created", "test.effect", "lgpd.consent_changed"} <= types
    assert {r["record"] for r in sections["webhook_deliveries"]} == {
        "webhooks.Attempt",
        "eventbus.Delivery",
        "eventbus.DeliveryAttempt",
    }
    assert {a["action"] for a in sections["audit_trail"]} >= {
        "contact.merge",
        "lgpd.data_request.create",
    }


def test_the_link_works_for_30_days_then_fails(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = export_at_d7(world, clock)
    path = link_path()
    clock.shift(dt.timedelta(days=29, hours=23))
    response = download(path)
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    body = b"".join(response.streaming_content)
    assert json.loads(body)["data_request_id"] == str(request.pk)
    assert AuditLog.objects.filter(action="lgpd.export.download").count() == 1
    clock.shift(dt.timedelta(hours=2))
    expired = download(path)
    assert expired.status_code == 410
    assert expired.json()["error"]["code"] == "link_expired"


def test_a_forged_link_is_refused(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    export_at_d7(world, clock)
    assert download(link_path()[:-3] + "abc").status_code == 404
    assert download("/lgpd/exports/not-a-token").status_code == 404


def test_a_second_run_builds_no_second_export(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = export_at_d7(world, clock)
    call_command("lgpd_run", str(request.pk))
    again = DataRequest.objects.get(pk=request.pk)
    assert (again.export_generated_at, again.export_sha256) == (
        request.export_generated_at,
        request.export_sha256,
    )
    assert EventLog.objects.filter(event_type="lgpd.export_generated").count() == 1
    assert len(list(export_storage.rglob("*.json"))) == 1
    assert (
        Delivery.objects.get(
            consumer=EXPORT_CONSUMER, event__event_type="lgpd.data_request_received"
        ).status
        == "done"
    )
    assert AuditLog.objects.filter(action="lgpd.data_request.manual_fallback").count() == 1


def test_lgpd_run_exports_a_stuck_request_before_its_time(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = request_for(world, "access")
    call_command("lgpd_run", str(request.pk), "--reason", "worker down")
    request.refresh_from_db()
    assert request.status == "completed" and request.export_name
    fallback = AuditLog.objects.get(action="lgpd.data_request.manual_fallback")
    assert fallback.reason == "worker down"
    clock.shift(dt.timedelta(days=7, seconds=1))
    drain_lgpd()  # the scheduled delivery finds it done
    assert EventLog.objects.filter(event_type="lgpd.export_generated").count() == 1


def test_redaction_erases_the_export(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    access = export_at_d7(world, clock)
    path = link_path()
    request_for(world, "redact")
    clock.shift(dt.timedelta(days=15, seconds=1))
    drain_lgpd()
    access.refresh_from_db()
    assert access.export_deleted_at is not None
    assert not list(export_storage.rglob("*.json"))
    assert download(path).status_code == 404
