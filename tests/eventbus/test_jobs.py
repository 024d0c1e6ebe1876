"""The event bus's scheduled jobs, run the way the scheduler and the endpoint run them."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
import time_machine
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.store.models import Delivery, EventLog
from jobs.registry import job_run
from tests.support.db import side_effect_rows

pytestmark = pytest.mark.django_db


def emit_effects(org: Organization, n: int) -> list[object]:
    return list(
        eventbus.emit_many(
            [
                {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": i}}
                for i in range(n)
            ],
            organization=org,
        )
    )


def completed_rows(run_id: object) -> int:
    event = EventLog.objects.get(event_type="cron.completed", entity_id=run_id)
    rows: int = event.payload["rows_processed"]
    return rows


def test_event_log_reaper_returns_expired_leases(org: Organization) -> None:
    emit_effects(org, 2)
    claims.claim(consumers=["effect-a-worker"], batch_size=10, worker_id="dead-worker")
    with time_machine.travel(timezone.now() + dt.timedelta(minutes=6)):
        result = job_run(name="event-log-reaper", trigger="manual")
    assert result.status == "completed" and completed_rows(result.run_id) == 2
    assert set(
        Delivery.objects.filter(consumer="effect-a-worker").values_list("status", flat=True)
    ) == {"pending"}


def test_event_log_drain_runs_a_bounded_batch(
    org: Organization, side_effects: None, settings: object
) -> None:
    settings.JOBS = {"event-log-drain": {"LIMIT": 4}}  # type: ignore[attr-defined]
    emit_effects(org, 5)  # 15 deliveries (three consumers)
    result = job_run(name="event-log-drain", trigger="manual")
    assert completed_rows(result.run_id) == 4
    assert len(side_effect_rows()) == 4
    assert Delivery.objects.filter(status="done").count() == 4


def test_event_log_drain_also_relays_broker_deliveries(org: Organization) -> None:
    eventbus.emit("test.broker", organization=org, entity_kind="t", payload={"n": 1})
    result = job_run(name="event-log-drain", trigger="manual")
    assert completed_rows(result.run_id) == 1
    assert Delivery.objects.get(consumer="broker-effect-worker").status == "processing"


def test_dlq_alert_job_alerts_on_growth_once_per_interval(
    org: Organization, settings: object, caplog: pytest.LogCaptureFixture
) -> None:
    settings.EVENTBUS = {**settings.EVENTBUS, "DLQ_ALERT_THRESHOLD": 2}  # type: ignore[attr-defined]
    emit_effects(org, 2)
    died = {"status": "dead", "finished_at": timezone.now()}
    first = Delivery.objects.filter(consumer="effect-a-worker").order_by("pk")[0]
    Delivery.objects.filter(pk=first.pk).update(**died)
    with caplog.at_level(logging.ERROR):
        assert completed_rows(job_run(name="dlq-alert", trigger="manual").run_id) == 0
    assert "DLQ growing" not in caplog.text
    Delivery.objects.filter(consumer="effect-a-worker").update(**died)
    with caplog.at_level(logging.ERROR):
        assert completed_rows(job_run(name="dlq-alert", trigger="manual").run_id) == 1
        assert completed_rows(job_run(name="dlq-alert", trigger="manual").run_id) == 0
    assert caplog.text.count("ALERT: DLQ growing: effect-a-worker") == 1
