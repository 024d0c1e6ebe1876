"""Webhook throughput benchmark: deliveries/s from emit to a local keep-alive receiver.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/webhooks.py [--deliveries N] [--repeat K] [--concurrency C]

What it measures, in one run, against one PostgreSQL server and one receiver:

1. Baseline: raw httpx POSTs of a webhook-sized JSON body to the receiver from C threads sharing
   one pooled client (no database, no signing): the ceiling of this machine's HTTP path.
2. Webhooks, 1 subscription: N events are emitted with `emit_many` (one subscription to `*`, so N
   deliveries), then `WebhookWorker` (concurrency C, default per-subscription bound) runs until
   nothing is due. The clock runs from the start of the emit to the last settled delivery:
   emit, claim, body + signature, POST, ack, attempt log, failure counters.
3. Webhooks, 20 subscriptions: N/20 events x 20 subscriptions = N deliveries, same clock.
4. Webhooks, 1 subscription with the per-subscription in-flight bound raised to C: shows how much
   of (2) is the isolation bound (one endpoint never gets more than its share) rather than the
   machinery.

The receiver is a `ThreadingHTTPServer` (HTTP/1.1 keep-alive) in its own process on 127.0.0.1,
answering 204 at once. Figures are medians of `--repeat` runs; the last column divides by the
baseline; the last line of stdout is `webhooks_ratio_to_raw=<x>` (1 subscription).

Isolation: like bench/drain.py, everything runs in a scratch database `<dbname>_bench_webhooks`
created (and migrated) on the server named by DATABASE_URL; the bus tables are truncated before
each measurement. Loopback targets are allowed only inside this process (the settings are set
in its environment before Django loads).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.drain import (  # noqa: E402  (the repository root must be importable first)
    Admin,
    child_env,
    recreate_scratch,
    say,
    scratch_beside,
)

RECEIVER_CODE = r"""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass

class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # many clients connect at once; the default backlog (5) resets them

server = Server(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

BUS_TABLES = ("webhooks_attempt", "eventbus_deliveryattempt", "eventbus_delivery", "event_log")


@dataclass
class Config:
    deliveries: int
    repeat: int
    concurrency: int
    base_url: str
    scratch_name: str
    scratch_url: str
    admin_conninfo: str
    scratch_conninfo: str


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args(argv)
    return Config(
        deliveries=args.deliveries,
        repeat=args.repeat,
        concurrency=args.concurrency,
        **scratch_beside("bench_webhooks"),
    )


def start_receiver() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", RECEIVER_CODE], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    port = int(process.stdout.readline())
    return process, f"http://127.0.0.1:{port}/hook"


def baseline(url: str, n: int, concurrency: int, body: bytes) -> float:
    """Raw httpx POSTs from `concurrency` threads sharing one pooled client; requests/s."""
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    counter = iter(range(n))
    lock = threading.Lock()
    errors: list[int] = []

    def work(client: httpx.Client) -> None:
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            response = client.post(url, content=body, headers={"content-type": "application/json"})
            if response.status_code != 204:
                errors.append(response.status_code)

    with httpx.Client(limits=limits, trust_env=False) as client:
        threads = [threading.Thread(target=work, args=(client,)) for _ in range(concurrency)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"baseline got {len(errors)} non-204 answers")
    return n / elapsed


def webhooks_run(
    admin: Admin,
    url: str,
    subscriptions: int,
    deliveries: int,
    concurrency: int,
    per_subscription: int | None = None,
) -> tuple[float, float]:
    """Emit -> all delivered; returns (deliveries/s end to end, emit seconds)."""
    from django.db import transaction

    import eventbus
    from core.models import Organization
    from webhooks import services
    from webhooks.models import Subscription
    from webhooks.worker import WebhookWorker, WebhookWorkerOptions

    admin.reset_bus()
    admin.conn.execute("TRUNCATE webhooks_subscription CASCADE")
    org = Organization.objects.create(name="Bench", slug=f"bench-{time.time_ns()}")
    for _ in range(subscriptions):
        services.subscription_create(organization=org, url=url, event_types=["*"], actor="bench")
    events = deliveries // subscriptions
    items = [
        {"event_type": "lead.assigned", "entity_kind": "lead", "payload": {"to_owner_id": f"u{i}"}}
        for i in range(events)
    ]
    admin.settle(BUS_TABLES)
    started = time.perf_counter()
    with transaction.atomic():
        eventbus.emit_many(items, organization=org)
    emitted = time.perf_counter() - started
    worker = WebhookWorker(
        WebhookWorkerOptions(
            concurrency=concurrency,
            per_subscription=per_subscription,
            once=True,
            listen=False,
            startup_jitter=0,
            batch_size=100,
        )
    )
    worker.run()
    elapsed = time.perf_counter() - started
    done = admin.rows("SELECT count(*) FROM eventbus_delivery WHERE status = 'done'")[0][0]
    if done != events * subscriptions or worker.processed != done:
        raise RuntimeError(f"expected {events * subscriptions} done deliveries, found {done}")
    assert Subscription.objects.filter(consecutive_failures=0).count() == subscriptions
    return done / elapsed, emitted


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    recreate_scratch(config)  # type: ignore[arg-type]
    os.environ.update(child_env(config))  # type: ignore[arg-type]
    os.environ.update(
        {
            "WEBHOOKS_ALLOW_PRIVATE_TARGETS": "true",
            "WEBHOOKS_ALLOW_HTTP": "true",
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from webhooks.sender import body_for

    receiver, url = start_receiver()
    admin = Admin(config.scratch_conninfo)
    try:
        body = body_sample(body_for)
        results: dict[str, list[float]] = {"baseline": [], "1": [], "20": [], "1-wide": []}
        emits: dict[str, list[float]] = {"1": [], "20": [], "1-wide": []}
        for run in range(config.repeat):
            say(f"run {run + 1}/{config.repeat}")
            results["baseline"].append(baseline(url, config.deliveries, config.concurrency, body))
            for key, subs, bound in (("1", 1, None), ("20", 20, None), ("1-wide", 1, 0)):
                rate, emitted = webhooks_run(
                    admin, url, subs, config.deliveries, config.concurrency,
                    per_subscription=bound or (None if bound is None else config.concurrency),
                )  # fmt: skip
                results[key].append(rate)
                emits[key].append(emitted)
        render(config, results, emits)
    finally:
        admin.close()
        receiver.terminate()
        receiver.wait()
    return 0


def body_sample(body_for: Any) -> bytes:
    import datetime as dt
    import uuid

    from eventbus.store.event import Event

    event = Event(
        id=uuid.uuid4(), organization_id=uuid.uuid4(), event_type="lead.assigned",
        entity_kind="lead", entity_id=None, payload={"to_owner_id": "u1"},
        metadata={"schema_version": 1}, created_at=dt.datetime.now(dt.UTC),
    )  # fmt: skip
    return bytes(body_for(event))


def render(config: Config, results: dict[str, list[float]], emits: dict[str, list[float]]) -> None:
    base = statistics.median(results["baseline"])
    print(
        f"\nwebhook deliveries, {config.deliveries} per measurement, concurrency "
        f"{config.concurrency}, median of {config.repeat} (runs in brackets)\n"
    )
    print(f"{'measurement':<44} {'per second':>11} {'ratio':>7}  runs")
    rows = [
        ("baseline: raw httpx POSTs (no DB, no signing)", "baseline"),
        ("webhooks: emit -> delivered, 1 subscription", "1"),
        ("webhooks: emit -> delivered, 20 subscriptions", "20"),
        ("webhooks: 1 subscription, in-flight bound = C", "1-wide"),
    ]
    for label, key in rows:
        median = statistics.median(results[key])
        runs = ", ".join(f"{r:,.0f}" for r in results[key])
        print(f"{label:<44} {median:>11,.0f} {median / base:>7.2f}  [{runs}]")
    print(
        "(the first two use the default per-subscription bound, "
        "WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION; the last lifts it to the concurrency)"
    )
    for key in ("1", "20", "1-wide"):
        median_emit = statistics.median(emits[key])
        print(f"  emit_many part of the '{key}' clock: median {median_emit:.3f}s")
    print(f"webhooks_ratio_to_raw={statistics.median(results['1']) / base:.2f}")


if __name__ == "__main__":
    sys.exit(main())
