"""The SLA check (warned past the due date, escalated near the legal deadline), the audit-trail
extraction, the CPF at rest, and delays read from settings at emit time."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core import mail
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from core import audit_archive
from core.models import AuditLog
from crm.models import Contact
from eventbus.store.models import Delivery
from jobs.registry import jobs
from lgpd import selectors, services
from lgpd.handlers import EXPORT_CONSUMER, REDACT_CONSUMER
from tests.lgpd.conftest import CPF, World, request_for

pytestmark = pytest.mark.django_db


def test_sla_warns_past_the_due_date_and_escalates_near_the_legal_deadline_once_each(
    world: World, clock: time_machine.Coordinates, caplog: pytest.LogCaptureFixture
) -> None:
    request = request_for(world, "access")
    clock.shift(dt.timedelta(days=6, hours=23))  # D+5 and D+6 on schedule: nothing
    assert services.sla_check() == 0
    clock.shift(dt.timedelta(hours=2))  # past the D+7 export
    assert services.sla_check() == 1
    assert services.sla_check() == 0  # once per level
    request.refresh_from_db()
    assert request.sla_warned_at is not None and request.sla_escalated_at is None
    clock.shift(dt.timedelta(days=6))  # D+13: two days before LGPD Art. 19's 15
    assert jobs.get("lgpd-sla-check").fn() == 1
    request.refresh_from_db()
    assert request.sla_escalated_at is not None
    subjects = [message.subject for message in mail.outbox]
    assert len(subjects) == 2
    assert "warning" in subjects[0] and "ESCALATION" in subjects[1]
    assert all(message.to == ["dpo@example.com"] for message in mail.outbox)
    assert "ALERT: LGPD data request overdue" in caplog.text


def test_a_redaction_on_schedule_mails_nobody_and_a_late_one_is_warned_once(
    world: World, clock: time_machine.Coordinates
) -> None:
    request_for(world, "redact")
    clock.shift(dt.timedelta(days=14, hours=23))
    assert services.sla_check() == 0 and mail.outbox == []
    clock.shift(dt.timedelta(hours=2))
    assert services.sla_check() == 1
    clock.shift(dt.timedelta(days=10))
    assert services.sla_check() == 0  # warned, never escalated by age
    assert ["warning" in m.subject for m in mail.outbox] == [True]


def test_completed_requests_raise_no_sla_alert(
    world: World, clock: time_machine.Coordinates
) -> None:
    request = request_for(world, "access")
    call_command("lgpd_run", str(request.pk))
    clock.shift(dt.timedelta(days=10))
    assert services.sla_check() == 0
    assert [m.to for m in mail.outbox] == [[world.contact.email]]  # the export link, no alert


def test_the_sla_job_has_a_daily_schedule() -> None:
    job = jobs.get("lgpd-sla-check")
    assert job.crontab == "0 9 * * *" and job.every is None


def test_audit_trail_csv_and_its_sha256(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    request = request_for(world, "redact")
    services.data_request_run(request_id=request.pk, actor="user:dpo")
    output = tmp_path / "trail.csv"
    call_command("lgpd_audit_trail", str(world.contact.pk), "--output", str(output))
    printed = capsys.readouterr().out
    digest = hashlib.sha256(output.read_bytes()).hexdigest()
    assert f"SHA-256 {digest}" in printed
    rows = list(csv.DictReader(output.read_text().splitlines()))
    actions = [row["action"] for row in rows]
    for expected in (
        "contact.merge",
        "lgpd.data_request.create",
        "lgpd.data_request.manual_fallback",
        "lgpd.redact.apply",
        "contact.created",
        "contact.anonymized",
    ):
        assert expected in actions, (expected, actions)
    assert [row["created_at"] for row in rows] == sorted(row["created_at"] for row in rows)
    extraction = AuditLog.objects.get(action="lgpd.audit_extraction")
    assert extraction.details["sha256"] == digest


def test_the_audit_trail_reads_the_audit_archives_too(
    world: World, tmp_path: Path, settings: Any
) -> None:
    request = request_for(world, "redact")
    services.data_request_run(request_id=request.pk, actor="user:dpo")
    archive = {**settings.STORAGES["archive"], "OPTIONS": {"location": str(tmp_path / "archive")}}
    settings.STORAGES = {**settings.STORAGES, "archive": archive}
    before = selectors.audit_trail(world.contact)

    archived = audit_archive.archive_due(now=timezone.now() + dt.timedelta(days=120))

    assert archived.rows > 0 and not AuditLog.objects.filter(action="lgpd.redact.apply").exists()
    assert sorted(selectors.audit_trail(world.contact)) == sorted(before)  # now from the archives


def test_commands_refuse_unknown_ids(db: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no data request"):
        call_command("lgpd_run", "00000000-0000-0000-0000-00000000000a")
    with pytest.raises(CommandError, match="no contact"):
        call_command(
            "lgpd_audit_trail",
            "00000000-0000-0000-0000-00000000000a",
            "--output",
            str(tmp_path / "x.csv"),
        )
    assert not (tmp_path / "x.csv").exists()


def test_cpf_is_encrypted_at_rest_with_its_own_key(world: World) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT cpf_encrypted FROM deskcomm_contact WHERE id = %s", [world.contact.pk]
        )
        (stored,) = cursor.fetchone()
    assert stored and CPF not in stored and "12345678909" not in stored
    assert Contact.objects.get(pk=world.contact.pk).cpf == CPF


def test_delays_are_settings_read_at_emit_time(
    world: World, clock: time_machine.Coordinates, settings: Any
) -> None:
    settings.LGPD = {**settings.LGPD, "EXPORT_DELAY_DAYS": 2, "REDACT_DELAY_DAYS": 3}
    request = request_for(world, "access")
    due = dict(
        Delivery.objects.filter(event__payload__request_id=str(request.pk)).values_list(
            "consumer", "next_attempt_at"
        )
    )
    assert due[EXPORT_CONSUMER] - request.received_at == dt.timedelta(days=2)
    assert due[REDACT_CONSUMER] - request.received_at == dt.timedelta(days=3)
