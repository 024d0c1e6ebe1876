"""`drain_events` as real subprocesses: parallel drains, kills, NOTIFY, lost connections."""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import time_machine
from django.db import connection
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.dispatch import claim as claims
from eventbus.dispatch.worker import Worker, WorkerOptions
from eventbus.store.models import Delivery, EventLog
from tests.support.consumers import EFFECT_CONSUMERS
from tests.support.db import (
    listening_backends,
    raw_connection,
    sessions_locking,
    side_effect_rows,
)
from tests.support.processes import REPO, Drain, start_drain, subprocess_env
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

EFFECT_ARGS = [arg for name in EFFECT_CONSUMERS for arg in ("--consumer", name)]


def emit_many(org: Organization, event_type: str, n: int, **payload: object) -> list[object]:
    return list(
        eventbus.emit_many(
            [
                {"event_type": event_type, "entity_kind": "thing", "payload": {"n": i, **payload}}
                for i in range(n)
            ],
            organization=org,
        )
    )


def test_three_drains_process_every_event_exactly_once(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    emit_many(org, "test.effect", 1000)
    processes.extend(start_drain("--once", "--batch-size", "25", *EFFECT_ARGS) for _ in range(3))
    for process in processes:
        assert process.wait(timeout=120) == 0, process.output()
    rows = side_effect_rows()
    assert len(rows) == 3000
    assert {runs for _, _, runs in rows} == {1}  # no (event, consumer) ran twice
    assert set(EventLog.objects.values_list("status", flat=True)) == {"done"}
    consumed = set(map(tuple, EventLog.objects.values_list("consumed_by", flat=True)))
    assert consumed == {tuple(sorted(EFFECT_CONSUMERS))}
    assert set(Delivery.objects.values_list("status", "attempts")) == {("done", 1)}


def test_sigkill_mid_batch_loses_nothing_and_the_effect_happens_once(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    emit_many(org, "test.slow", 12, seconds=0.15)
    drain = start_drain("--batch-size", "12", "--consumer", "slow-effect-worker", "--no-listen")
    processes.append(drain)
    wait_for(lambda: len(side_effect_rows()) >= 2, timeout=60, what="the batch to be under way")
    drain.send_signal(signal.SIGKILL)
    drain.wait(timeout=10)
    # Its session may still hold an ack's row lock, which the reaper (SKIP LOCKED) would pass.
    wait_for(lambda: sessions_locking("eventbus_delivery") == 0, timeout=30, what="its session")
    held = Delivery.objects.filter(status="processing").count()  # the killed worker's claims
    assert held >= 2  # (those it finished were acked as they finished)

    lease = dt.timedelta(seconds=31)
    with time_machine.travel(timezone.now() + lease, tick=True):
        reaped, dead = claims.reap()
        assert reaped == held and dead == []
        # The worker held several: none is charged, each is marked and runs alone next.
        assert set(
            Delivery.objects.exclude(status="done").values_list("status", "attempts", "isolate")
        ) == {("pending", 0, True)}
        Worker(
            WorkerOptions(
                consumers=["slow-effect-worker"], once=True, listen=False, startup_jitter=0
            )
        ).run()
    assert set(Delivery.objects.values_list("status", "attempts")) == {("done", 1)}
    assert Delivery.objects.filter(redelivered=True).count() == held
    effects = side_effect_rows()
    assert len(effects) == 12 and len({event for event, _, _ in effects}) == 12


def test_sigterm_finishes_the_running_delivery_and_releases_the_rest(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    emit_many(org, "test.slow", 10, seconds=0.4)
    drain = start_drain("--batch-size", "10", "--consumer", "slow-effect-worker", "--no-listen")
    processes.append(drain)
    wait_for(lambda: len(side_effect_rows()) >= 1, timeout=60, what="the first delivery to start")
    drain.send_signal(signal.SIGTERM)
    assert drain.wait(timeout=20) == 0, drain.output()
    statuses = dict(Delivery.objects.values_list("id", "status"))
    done = [pk for pk, status in statuses.items() if status == "done"]
    assert 1 <= len(done) < 10
    assert len(side_effect_rows()) == len(done)  # started work finished and was acked
    released = Delivery.objects.exclude(pk__in=done)
    assert set(released.values_list("status", "attempts", "lease_token")) == {("pending", 0, None)}
    # Pending again at once: a new claim takes them without waiting for any lease.
    batch = claims.claim(consumers=["slow-effect-worker"], batch_size=20, worker_id="next")
    assert len(batch.events) == 10 - len(done)


def test_notify_wakes_an_idle_worker_well_under_a_second(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    drain = start_drain("--poll-interval", "5", "--consumer", "notify-probe-worker")
    processes.append(drain)
    wait_for(lambda: listening_backends() == 1, timeout=60, what="the worker to LISTEN")
    time.sleep(0.3)  # let the worker finish its first (empty) claim and enter its 5 s idle wait
    started = time.monotonic()
    eventbus.emit(
        "message.received",
        organization=org,
        entity_kind="message",
        payload={
            "message_id": "m1",
            "direction": "inbound",
            "channel": "whatsapp",
            "conversation_id": "c1",
            "contact_id": "k1",
            "waha_message_id": "w1",
        },
    )
    wait_for(lambda: len(side_effect_rows()) == 1, timeout=4.5, what="the NOTIFY wake-up")
    latency = time.monotonic() - started
    assert latency < 1.0, f"picked up after {latency:.2f}s"


def test_worker_survives_losing_its_database_connections(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    drain = start_drain("--poll-interval", "0.2", *EFFECT_ARGS)
    processes.append(drain)
    emit_many(org, "test.effect", 5)
    wait_for(lambda: len(side_effect_rows()) == 15, timeout=60, what="the first events")
    with connection.cursor() as cursor:
        # Client sessions only: an autovacuum worker visiting the test database may not be
        # terminated by this role (PostgreSQL refuses, and the test failed when one was there).
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND backend_type = 'client backend'"
        )
        assert cursor.fetchone()[0] >= 1
    emit_many(org, "test.effect", 5)
    wait_for(lambda: len(side_effect_rows()) == 30, timeout=60, what="events after reconnecting")
    assert drain.poll() is None  # still running
    drain.send_signal(signal.SIGTERM)
    assert drain.wait(timeout=20) == 0
    assert "LISTEN connection failed" in drain.output()


def waiting_ack_backends() -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE '%%WITH acked AS%%'"
        )
        return [row[0] for row in cursor.fetchall()]


def test_connection_lost_mid_ack_reconnects_and_settles_once(
    org: Organization, side_effects: None, processes: list[Drain]
) -> None:
    """The ack blocks on a locked event row; its connection is killed; nothing is lost or re-run."""
    emit_many(org, "test.effect", 5)
    with raw_connection() as blocker:
        blocker.execute("BEGIN")
        blocker.execute("SELECT id FROM event_log FOR UPDATE")
        drain = start_drain("--poll-interval", "0.2", "--no-listen", *EFFECT_ARGS)
        processes.append(drain)
        wait_for(lambda: bool(waiting_ack_backends()), timeout=60, what="the ack to block")
        assert side_effect_rows()  # handlers ran (maybe not all yet); the ack is what is stuck
        blocker.execute("SELECT pg_terminate_backend(%s)", [waiting_ack_backends()[0]])
        blocker.execute("COMMIT")
    wait_for(
        lambda: not Delivery.objects.exclude(status="done").exists(),
        timeout=60,
        what="the unsettled batch to be acked after reconnecting",
    )
    assert {runs for _, _, runs in side_effect_rows()} == {1}  # settled, not re-run
    assert set(EventLog.objects.values_list("status", flat=True)) == {"done"}
    drain.send_signal(signal.SIGTERM)
    assert drain.wait(timeout=20) == 0
    assert "database error" in drain.output()


# What a drain worker does not load at start (docs/architecture.md, "The hot path": a drain
# worker loads less): the client libraries of the integrations and the web's stack, imported by
# the code that uses them (a gateway built, a request sent, a template compiled, a secret
# decrypted) or only by the web (URLconf, admin and template checks). celery/kombu
# (django_celery_beat's models) and pgvector (ai's model field) stay: installed apps' models.
NOT_LOADED_BY_A_DRAIN_WORKER = (
    "openai",
    "httpx",
    "httpcore",
    "jinja2",
    "cryptography",
    "requests",
    "rest_framework.views",
    "drf_spectacular.openapi",
    "django.test",
    "sentry_sdk",
    "pygments",
    "rich",
)

# `manage.py drain_events ARGS` as deployed (system checks included), then, at exit, what it
# had imported and the consumers it had registered.
IMPORT_PROBE = """
import atexit, json, os, runpy, sys

def report():
    from eventbus.store.registry import registry

    consumers = {c.name: c.handler.__module__ for c in registry.all()}
    with open(os.environ["IMPORT_PROBE_OUT"], "w") as out:
        json.dump({"modules": sorted(sys.modules), "consumers": consumers}, out)

atexit.register(report)
sys.argv = ["manage.py", "drain_events", *sys.argv[1:]]
runpy.run_path("manage.py", run_name="__main__")
"""


def test_a_drain_worker_starts_without_the_client_libraries_and_registers_every_consumer(
    tmp_path: Path,
) -> None:
    from eventbus.store.registry import registry

    out = tmp_path / "probe.json"
    probe = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, "--once", "--no-listen"],
        cwd=REPO,
        env=subprocess_env(IMPORT_PROBE_OUT=str(out), SENTRY_DSN=""),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert probe.returncode == 0, probe.stdout + probe.stderr
    report = json.loads(out.read_text())

    loaded = set(report["modules"])
    assert [name for name in NOT_LOADED_BY_A_DRAIN_WORKER if name in loaded] == []
    # every app's consumers are registered all the same (the handlers modules were imported)
    product = {
        name: module
        for name, module in report["consumers"].items()
        if not module.startswith("tests.")
    }
    expected = {c.name: c.handler.__module__ for c in registry.all()}
    assert product == {n: m for n, m in expected.items() if not m.startswith("tests.")}
    assert {m.split(".")[0] for m in product.values()} >= {
        "ai",
        "lgpd",
        "nuvemshop",
        "pipelines",
        "whatsapp",
    }
