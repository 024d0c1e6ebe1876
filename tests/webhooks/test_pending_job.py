"""The `process-pending-webhooks` job: the fallback sender when no `deliver_webhooks` runs."""

from __future__ import annotations

import pytest

import eventbus
from core.models import Organization, WorkerProcess
from eventbus.store.models import Delivery, EventLog
from jobs.registry import job_run
from tests.support.receiver import Receiver
from tests.webhooks.conftest import Subscribe

pytestmark = pytest.mark.django_db(transaction=True)


def completed_rows(run_id: object) -> int:
    event = EventLog.objects.get(event_type="cron.completed", entity_id=run_id)
    return int(event.payload["rows_processed"])


def test_job_sends_due_webhooks(
    org: Organization, subscribe: Subscribe, receiver: Receiver
) -> None:
    assert completed_rows(job_run(name="process-pending-webhooks", trigger="manual").run_id) == 0
    subscription, _ = subscribe(receiver.url(), ["test.job"])
    for n in range(3):
        eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": n})
    result = job_run(name="process-pending-webhooks", trigger="manual")
    assert completed_rows(result.run_id) == 3
    assert len(receiver.requests) == 3
    statuses = Delivery.objects.filter(consumer=f"webhook:{subscription.pk}").values_list(
        "status", flat=True
    )
    assert set(statuses) == {"done"}


def test_a_job_run_registers_no_worker_of_its_own(
    org: Organization, subscribe: Subscribe, receiver: Receiver
) -> None:
    """The pass runs inside the jobs process (registered already): every minute's run used to
    leave one more "stopped deliver_webhooks" row on the workers page."""
    subscribe(receiver.url(), ["test.job"])
    for run in range(3):
        eventbus.emit("test.job", organization=org, entity_kind="t", payload={"n": run})
        result = job_run(name="process-pending-webhooks", trigger="manual")
        assert completed_rows(result.run_id) == 1
    assert len(receiver.requests) == 3
    assert not WorkerProcess.objects.exists()
