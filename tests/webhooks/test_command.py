"""`manage.py deliver_webhooks` as a real subprocess: delivers, then stops cleanly on SIGTERM."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading

import pytest
from django.db import connections

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery
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


def start_sender(managed: list[Managed], **env: str) -> Managed:
    """`deliver_webhooks` polling every 0.2 s, allowed to reach the loopback receivers."""
    sender = Managed(
        "deliver_webhooks",
        "--poll-interval",
        "0.2",
        "--no-listen",
        WEBHOOKS_ALLOW_PRIVATE_TARGETS="true",
        WEBHOOKS_ALLOW_HTTP="true",
        **env,
    )
    managed.append(sender)
    return sender


def test_deliver_webhooks_survives_losing_its_database_connections(
    org: Organization, receiver: Receiver, subscribe: Subscribe, managed: list[Managed]
) -> None:
    subscribe(receiver.url())

    def emit(n: int) -> None:
        for i in range(n):
            eventbus.emit(
                "lead.assigned", organization=org, entity_kind="lead", payload={"to_owner_id": i}
            )

    sender = start_sender(managed)
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


class TricklingEndpoint:
    """A loopback endpoint that reads a request, then sends its response headers one byte every
    0.2 s and never finishes them: each read beats the client's read timeout, so only the
    sender's own deadline ends the attempt (a stuck send, as a hung DNS lookup would be)."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while not self.stop.is_set():
                conn, _ = self.listener.accept()
                threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            while not self.stop.wait(0.2):
                conn.sendall(b"X")

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


def test_a_sender_with_too_many_abandoned_threads_exits_75(
    org: Organization, subscribe: Subscribe, managed: list[Managed]
) -> None:
    """The command exits with the runner's code (75: start a fresh process), not 0."""
    endpoint = TricklingEndpoint()
    try:
        subscribe(endpoint.url())
        eventbus.emit(
            "lead.assigned", organization=org, entity_kind="lead", payload={"to_owner_id": "u1"}
        )
        sender = start_sender(
            managed,
            WEBHOOKS_TIMEOUT="0.5",  # the attempt is given up after 2 x 0.5 + 5 s
            EVENTBUS_MAX_ABANDONED_THREADS="1",
        )
        wait_for(lambda: sender.poll() is not None, timeout=90, what=sender.output)
        assert sender.returncode == 75, sender.output()
        assert "too many abandoned handler threads" in sender.output()
    finally:
        endpoint.close()
