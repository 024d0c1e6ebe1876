"""Who can reach an export (item: no credential on the bus): the API with `lgpd:read` of the same
organization, the admin with the view permission, and the e-mailed link; every download
audited. What the bus carries about LGPD: ids, states and dates only."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.test import Client

from core.models import AuditLog, Organization
from eventbus.store.models import Delivery, EventLog
from lgpd.models import DataRequest
from tests.lgpd.conftest import NEEDLES, World, run_after
from tests.support.admin import staff
from tests.support.api import api_client, error_of
from webhooks.models import Subscription

pytestmark = pytest.mark.django_db

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def url_of(request: DataRequest) -> str:
    return f"/api/v1/lgpd/data-requests/{request.pk}/export"


def body_of(response: Any) -> dict[str, Any]:
    return dict(json.loads(b"".join(response.streaming_content)))


def download_audits() -> list[tuple[str, str]]:
    rows = AuditLog.objects.filter(action="lgpd.export.download").order_by("id")
    return [(row.actor, row.details["channel"]) for row in rows]


def test_the_api_serves_the_export_to_lgpd_read_of_the_same_organization(
    world: World, clock: time_machine.Coordinates, export_storage: Path, org_b: Organization
) -> None:
    request = run_after(world, clock, "access", 7)
    reader = api_client(world.org, "lgpd:read")
    listed = reader.get(f"/api/v1/lgpd/data-requests/{request.pk}").json()
    assert listed["export_url"].endswith(url_of(request))
    response = reader.get(url_of(request))
    assert response.status_code == 200, response.content
    assert body_of(response)["data_request_id"] == str(request.pk)
    [(actor, channel)] = download_audits()
    assert channel == "api" and actor.startswith("api_key:dck_")

    error_of(api_client(world.org, "lgpd:write", "events:read").get(url_of(request)), 403,
             "permission_denied")  # fmt: skip
    error_of(api_client(org_b).get(url_of(request)), 404, "not_found")
    error_of(Client().get(url_of(request)), 401, "not_authenticated")
    assert len(download_audits()) == 1


def test_the_api_answers_410_once_the_download_period_ended(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = run_after(world, clock, "access", 7)
    reader = api_client(world.org, "lgpd:read")
    clock.shift(dt.timedelta(days=30, seconds=1))
    error_of(reader.get(url_of(request)), 410, "gone")
    assert reader.get(f"/api/v1/lgpd/data-requests/{request.pk}").json()["export_url"] is None
    assert download_audits() == []


def test_the_admin_serves_the_export_to_staff_who_may_view_requests(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = run_after(world, clock, "access", 7)
    path = f"/admin/lgpd/datarequest/{request.pk}/export/"
    viewer = Client()
    viewer.force_login(staff("dpo", "lgpd.view_datarequest"))
    page = viewer.get(f"/admin/lgpd/datarequest/{request.pk}/change/").content.decode()
    assert path in page
    response = viewer.get(path)
    assert response.status_code == 200
    assert body_of(response)["data_request_id"] == str(request.pk)
    assert download_audits() == [("user:dpo", "admin")]
    outsider = Client()
    outsider.force_login(staff("support", "eventbus.view_eventlog"))
    assert outsider.get(path).status_code in (403, 404)
    assert len(download_audits()) == 1


def test_lgpd_events_carry_ids_states_and_dates_only(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    run_after(world, clock, "access", 7)
    run_after(world, clock, "redact", 15)
    events = list(EventLog.objects.filter(event_type__startswith="lgpd."))
    assert {e.event_type for e in events} == {
        "lgpd.consent_changed",
        "lgpd.data_request_received",
        "lgpd.export_generated",
        "lgpd.redact_applied",
    }
    for event in events:
        for key, value in event.payload.items():
            assert _harmless(key, value), (event.event_type, key, value)
        text = json.dumps(event.payload)
        assert "http" not in text and "/lgpd/" not in text, event.payload
        assert not [needle for needle in NEEDLES if needle.lower() in text.lower()]


def _harmless(key: str, value: object) -> bool:
    """An id, a date, a state (a short lower-case word) or a flag."""
    if isinstance(value, bool) or value is None:
        return True
    if not isinstance(value, str):
        return False
    if key.endswith("_id"):
        return bool(UUID_RE.match(value))
    if key.endswith("_at"):
        return dt.datetime.fromisoformat(value) is not None
    return re.fullmatch(r"[a-z_]{1,40}", value) is not None


def test_a_star_subscription_gets_no_lgpd_event_and_a_listed_one_gets_no_credential(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    listed = Subscription.objects.create(
        organization=world.org,
        url="https://hooks.example.com/lgpd",
        event_types=["lgpd.*"],
        secret_encrypted="unused",  # pragma: allowlist secret
    )
    run_after(world, clock, "access", 7)
    star = {
        d.event.event_type
        for d in Delivery.objects.filter(consumer=world.subscription.consumer).select_related(
            "event"
        )
    }
    assert not [t for t in star if t.startswith("lgpd.")], star
    exported = EventLog.objects.get(event_type="lgpd.export_generated")
    assert Delivery.objects.filter(event=exported, consumer=listed.consumer).exists()
    assert set(exported.payload) == {"request_id", "expires_at", "link_sent"}
    assert uuid.UUID(exported.payload["request_id"])
    assert exported.metadata["schema_version"] == 2
