"""Export (R-L2): D+7, every category in the bundle, idempotent; the file reached only through
the admin, the API (`lgpd:read`, same organization) or a single-use link e-mailed to the data
subject, for 30 days; every download audited."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import time_machine
from django.core import mail
from django.core.management import call_command
from django.test import Client
from django.utils.timezone import now

from core.lgpd_registry import REGISTRY
from core.models import AuditLog
from crm.models import Contact
from eventbus.store.models import Delivery, EventLog
from jobs.registry import jobs
from lgpd.handlers import EXPORT_CONSUMER
from lgpd.models import DataRequest
from tests.lgpd.conftest import CPF, EMAIL, NAME, PHONE, World, drain_lgpd, request_for, run_after
from tests.support.admin import staff
from tests.support.factories import OrderFactory

pytestmark = pytest.mark.django_db


def export_at_d7(world: World, clock: time_machine.Coordinates) -> DataRequest:
    return run_after(world, clock, "access", 7)


def link_path(index: int = -1) -> str:
    """The path of the download link in the (last) e-mail sent to the data subject."""
    message = [m for m in mail.outbox if m.to == [EMAIL]][index]
    [url] = re.findall(r"https?://\S+", message.body)
    return urlsplit(url).path


def download(path: str) -> Any:
    """What the data subject's browser does: open the link, press the download button."""
    client = Client()
    page = client.get(path)
    if page.status_code != 200:
        return page
    return read(client.post(path))


def read(response: Any) -> Any:
    """The response with a streamed body read into `response.body` (the test client closes the
    file once the stream is consumed)."""
    if response.streaming:
        response.body = b"".join(response.streaming_content)
    return response


def downloads() -> list[tuple[str, str]]:
    audits = AuditLog.objects.filter(action="lgpd.export.download").order_by("id")
    return [(a.actor, a.details["channel"]) for a in audits]


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
        "crm.Lead",
        "crm.LeadActivity",
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


def test_the_link_is_mailed_to_the_subject_and_works_once(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = export_at_d7(world, clock)
    [message] = [m for m in mail.outbox if m.to == [EMAIL]]
    assert "works once" in message.body
    assert request.export_link_sent_at is not None and request.export_link_hash
    assert AuditLog.objects.filter(action="lgpd.export.link_sent").count() == 1
    path = link_path()
    client = Client()
    page = client.get(path)  # a mail scanner fetching the link does not use it up
    assert page.status_code == 200 and b"Download my data" in page.content
    assert client.get(path).status_code == 200
    response = read(client.post(path))
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment")
    assert json.loads(response.body)["data_request_id"] == str(request.pk)
    assert downloads() == [("export-link", "link")]
    again = client.post(path)
    assert again.status_code == 410 and b"already used" in again.content
    assert client.get(path).status_code == 410
    assert downloads() == [("export-link", "link")]


def test_the_link_stops_working_after_30_days(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    export_at_d7(world, clock)
    path = link_path()
    clock.shift(dt.timedelta(days=29, hours=23))
    assert Client().get(path).status_code == 200
    clock.shift(dt.timedelta(hours=2))
    expired = download(path)
    assert expired.status_code == 410 and b"download period has ended" in expired.content
    assert downloads() == []


def test_a_new_link_replaces_the_old_one(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    from lgpd import services

    request = export_at_d7(world, clock)
    first = link_path()
    assert services.export_link_send(request_id=request.pk, actor="user:dpo")
    second = link_path()
    assert first != second
    assert download(first).status_code == 404
    assert download(second).status_code == 200


def test_a_contact_without_e_mail_gets_no_link_and_the_dpo_is_told(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    Contact.objects.filter(pk=world.contact.pk).update(email="")
    request = export_at_d7(world, clock)
    assert request.status == "completed" and request.export_name
    assert request.export_link_sent_at is None and not request.export_link_hash
    assert [m.to for m in mail.outbox] == [["dpo@example.com"]]
    assert "no e-mail address" in mail.outbox[0].subject
    assert AuditLog.objects.get(action="lgpd.export.link_not_sent").reason == "no e-mail address"


def test_a_forged_link_is_refused(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    export_at_d7(world, clock)
    assert download(link_path()[:-3] + "abc").status_code == 404
    assert download("/lgpd/exports/not-a-token").status_code == 404
    assert Client().post(link_path()[:-3] + "abc").status_code == 404
    assert downloads() == []


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
    assert access.export_deleted_reason == "redacted"
    assert not list(export_storage.rglob("*.json"))
    assert download(path).status_code == 410


def test_the_expiry_job_deletes_the_file_when_the_period_ends(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    request = export_at_d7(world, clock)
    expiry = jobs.get("lgpd-export-expiry")
    assert expiry.crontab == "20 * * * *"
    clock.shift(dt.timedelta(days=29, hours=23))
    assert expiry.fn() == 0
    assert (export_storage / request.export_name).exists()
    clock.shift(dt.timedelta(hours=2))
    assert expiry.fn() == 1
    request.refresh_from_db()
    assert not (export_storage / request.export_name).exists()
    assert (request.export_deleted_reason, request.export_deleted_at) == ("expired", now())
    assert AuditLog.objects.filter(action="lgpd.export.expire").count() == 1
    assert expiry.fn() == 0  # once
    timeline = Client()
    timeline.force_login(staff("dpo", "lgpd.view_datarequest"))
    page = timeline.get(f"/admin/lgpd/datarequest/{request.pk}/change/").content.decode()
    assert "this export was deleted (expired)" in page


def test_the_bundle_has_the_orders_holding_the_subjects_identifiers_without_a_link(
    world: World, clock: time_machine.Coordinates, export_storage: Path
) -> None:
    """Issue 41 item 5: an order of no contact with the subject's e-mail is theirs to see;
    another person's is not."""
    mine = OrderFactory(organization=world.org, contact=None, number="api-1", customer_email=EMAIL)
    theirs = OrderFactory(
        organization=world.org, contact=None, number="api-2", customer_email="ana@example.com"
    )
    request = export_at_d7(world, clock)
    bundle = json.loads((export_storage / request.export_name).read_text())
    numbers = {row["number"] for row in bundle["categories"]["orders"]}
    assert mine.number in numbers and theirs.number not in numbers
    assert {str(world.order.pk), str(mine.pk)} <= {
        row["pk"] for row in bundle["categories"]["orders"]
    }
