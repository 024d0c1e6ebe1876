"""`manage.py deliver_webhooks` as a real subprocess: delivers, then stops cleanly on SIGTERM."""

from __future__ import annotations

import signal
import sys

import pytest

import eventbus
from deskcomm.models import Organization
from eventbus.models import Delivery
from tests.conftest import REPO, subprocess_env
from tests.support.receiver import Receiver
from tests.webhooks.conftest import Subscribe

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
    assert set(Delivery.objects.values_list("status", flat=True)) == {"done"}
