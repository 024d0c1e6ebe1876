"""`manage.py deliver_webhooks` as a real subprocess: delivers, then stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import sys

import pytest
from django.db import connections

import eventbus
from core.models import Organization
from eventbus.models import Delivery
from tests.support.db import raw_connection
from tests.support.processes import REPO, Managed, subprocess_env
from tests.support.receiver import Receiver
from tests.support.waiting import wait_for
from tests.webhooks.conftest import Subscribe

# The webhook deliveries only: lead.assigned also has a drain consumer (notification-worker).
WEBHOOK_DELIVERIES = Delivery.objects.filter(consumer__startswith="webhook:")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_deliver_webhooks_sends_and_exits_0_on_sigterm(
    org: Organization, receiver: Receiver, subscribe: Subscribe
) -> None:
    import subprocess

    subscribe(receiver.url())
    for i in range(5):
        eventbus.emit(
            "lead.assigned", organization=org, entity_kind="lead", payload={"to_owner_id": f"u{i}"}
        )
    env = subprocess_env(
        WEBHOOKS_ALLOW_PRIVATE_TARGETS="true", WEBHOOKS_ALLOW_HTTP="true", LOG_LEVEL="INFO"
    )
    process = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "deliver_webhooks", "--poll-interval", "0.2"],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        receiver.wait_for(lambda: len(receiver.requests) == 5, timeout=60, what="5 deliveries")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
        output = process.communicate()[0]
    assert "stopped after" in output, output
    assert set(WEBHOOK_DELIVERIES.values_list("status", flat=True)) == {"done"}


def test_deliver_webhooks_survives_losing_its_database_connections(
    org: Organization, receiver: Receiver, subscribe: Subscribe, managed: list[Managed]
) -> None:
    subscribe(receiver.url())

    def emit(n: int) -> None:
        for i in range(n):
            eventbus.emit(
                "lead.assigned", organization=org, entity_kind="lead", payload={"to_owner_id": i}
            )

    sender = Managed(
        "deliver_webhooks",
        "--poll-interval",
        "0.2",
        "--no-listen",
        WEBHOOKS_ALLOW_PRIVATE_TARGETS="true",
        WEBHOOKS_ALLOW_HTTP="true",
    )
    managed.append(sender)
    emit(3)
    receiver.wait_for(lambda: len(receiver.requests) == 3, timeout=60, what="3 deliveries")
    with raw_connection() as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
    connections.close_all()  # this test's own connection was cut too
    emit(3)
    receiver.wait_for(lambda: len(receiver.requests) == 6, timeout=60, what=sender.output)
    wait_for(
        lambda: set(WEBHOOK_DELIVERIES.values_list("status", flat=True)) == {"done"},
        timeout=30,
        what=sender.output,
    )
    assert sender.poll() is None
    assert set(WEBHOOK_DELIVERIES.values_list("attempts", flat=True)) == {1}  # nothing charged
