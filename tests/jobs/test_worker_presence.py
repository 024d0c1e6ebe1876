"""Each rundramatiq worker process in the worker registry: its threads, the messages running,
when it last took one; marked stopped on shutdown."""

from __future__ import annotations

from types import SimpleNamespace

import dramatiq
import pytest

from core.models import WorkerProcess
from jobs.brokers import WorkerPresence

pytestmark = pytest.mark.django_db(transaction=True)  # the registry writes on its own connection


def test_a_jobs_worker_process_registers_counts_in_flight_and_stops() -> None:
    broker = dramatiq.get_broker()
    presence = WorkerPresence()
    presence.after_worker_boot(broker, SimpleNamespace(worker_threads=4))
    message = SimpleNamespace(message_id="m1")
    presence.before_process_message(broker, message)
    assert presence._presence is not None
    presence._presence.beat()
    row = WorkerProcess.objects.get(kind="rundramatiq")
    assert (row.concurrency, row.in_flight, row.pumps) == (4, 1, "jobs")
    assert row.last_claim_at is not None
    presence.after_process_message(broker, message, result=None)
    presence.before_worker_shutdown(broker, SimpleNamespace(worker_threads=4))
    row.refresh_from_db()
    assert (row.in_flight, row.stopped_at is not None) == (0, True)
