"""The online partition upgrade of a populated database, with the bus working through it.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/partition_upgrade.py [--events 1000000] [--batch 5000] [--keep]

What it does, against the scratch database `<DATABASE_URL's name>_bench_upgrade` (dropped and
re-created, migrated: unpartitioned, as a new install; the base database is never touched):

1. Seeds `--events` events of history over 90 days for 30 organizations server-side
   (bench/admin_changelists.py's seed: ~1.6 deliveries per event, 2% dead with 8 attempts each,
   the newest deliveries pending), VACUUM ANALYZE.
2. Starts a load child (`--load`): in a loop, one `eventbus.emit` in its own transaction, and
   every tenth time a claim of up to 50 due deliveries that it acks, or fails once every
   fourth claim (an attempt row each): the writes the upgrade must not lose. It records each
   emit's id and latency.
3. After `--before` seconds of load, runs the real command `manage.py partition_event_log
   --batch B` (a subprocess: its own connection, as an operator would), timed; the load goes on
   during it and `--after` seconds after it.
4. Stops the load, then checks: the three tables are partitioned; every id the load emitted is
   in the log once; the log holds the seeded events plus those; every event has as many
   deliveries as its fan-out, none twice (ids and (event, consumer) pairs distinct); every
   delivery and attempt carries its event's time; no row of the old tables is missing from the
   new ones; every ack the load made reached its event's summary.

Prints the upgrade's time and rows per second, the emit latency (median and p95) before, during
and after it with the during/before ratio, and the checks. The last lines are `key=value`
figures. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench import admin_changelists as console  # noqa: E402
from bench.drain import say  # noqa: E402

EMIT_TYPE = "conversation.opened"  # one consumer in bench/admin_consumers.py
EMIT_CONSUMER = "analytics-worker"
CLAIM_EVERY = 10  # emits per claim in the load loop
FAIL_EVERY = 4  # claims per failed (nacked) claim

# The checks, each a count that must be 0 (or, for `acks`, the consumed_by summary).
CHECKS = {
    "not partitioned": """
        SELECT count(*) FROM pg_class
         WHERE oid IN ('event_log'::regclass, 'eventbus_delivery'::regclass,
                       'eventbus_deliveryattempt'::regclass) AND relkind <> 'p'""",
    "events with the wrong number of deliveries": """
        SELECT count(*) FROM event_log e
          LEFT JOIN (SELECT event_id, count(*) AS n FROM eventbus_delivery GROUP BY event_id) d
            ON d.event_id = e.id
         WHERE coalesce(d.n, 0) <> e.fanout""",
    "delivery ids twice": "SELECT count(*) - count(DISTINCT id) FROM eventbus_delivery",
    "(event, consumer) pairs twice": """
        SELECT count(*) - count(DISTINCT (event_id, consumer)) FROM eventbus_delivery""",
    "attempt ids twice": "SELECT count(*) - count(DISTINCT id) FROM eventbus_deliveryattempt",
    "deliveries without their event's time": """
        SELECT count(*) FROM eventbus_delivery d JOIN event_log e ON e.id = d.event_id
         WHERE d.event_created_at IS DISTINCT FROM e.created_at""",
    "attempts without their delivery's time": """
        SELECT count(*) FROM eventbus_deliveryattempt a
          LEFT JOIN eventbus_delivery d ON d.id = a.delivery_id
         WHERE a.event_created_at IS DISTINCT FROM d.event_created_at""",
    "old events missing": """
        SELECT count(*) FROM event_log_unpartitioned o
         WHERE NOT EXISTS (SELECT 1 FROM event_log n WHERE n.id = o.id)""",
    "old deliveries missing": """
        SELECT count(*) FROM eventbus_delivery_unpartitioned o
         WHERE NOT EXISTS (SELECT 1 FROM eventbus_delivery n WHERE n.id = o.id)""",
    "old attempts missing": """
        SELECT count(*) FROM eventbus_deliveryattempt_unpartitioned o
         WHERE NOT EXISTS (SELECT 1 FROM eventbus_deliveryattempt n WHERE n.id = o.id)""",
    "acks missing from their event's summary": """
        SELECT count(*) FROM eventbus_delivery d JOIN event_log e ON e.id = d.event_id
         WHERE d.status = 'done' AND NOT d.consumer = ANY(e.consumed_by)""",
}


def parse_args(argv: Sequence[str] | None) -> tuple[console.Config, argparse.Namespace]:
    parser = argparse.ArgumentParser(description="The online partition upgrade under load.")
    parser.add_argument("--events", type=int, default=1_000_000, help="events of history")
    parser.add_argument("--batch", type=int, default=5000, help="rows copied per transaction")
    parser.add_argument("--before", type=float, default=20.0, help="seconds of load before")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of load after")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    args = parser.parse_args(argv)
    if args.events < 1000 or args.batch < 1:
        parser.error("--events must be at least 1000 and --batch positive")
    config = console.config_beside("bench_upgrade", events=args.events, requests=1, keep=args.keep)
    return config, args


def load_loop(out: str) -> None:
    """`--load OUT`: emit, claim and settle until SIGTERM; then write what it did to OUT."""
    import django

    django.setup()
    from django.db import transaction

    import eventbus
    from core import rls
    from core.models import Organization
    from eventbus.dispatch import claim as claims
    from eventbus.dispatch.retry import Verdict

    rls.bypass_process()
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    orgs = list(Organization.objects.order_by("slug"))
    payload = {"conversation_id": "c", "contact_id": "k", "channel": "whatsapp"}
    emits: list[tuple[float, float, str]] = []  # (wall time, ms, event id)
    verdict = Verdict(dead=False, delay=3600, error_class="BenchError", error="bench")
    acked = failed = 0
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while not stopping:
        started = time.perf_counter()
        with transaction.atomic():
            event = eventbus.emit(
                EMIT_TYPE,
                organization=orgs[len(emits) % len(orgs)],
                entity_kind="conversation",
                payload=payload,
            )
        emits.append((time.time(), (time.perf_counter() - started) * 1000, str(event.id)))
        if len(emits) % CLAIM_EVERY:
            continue
        batch = claims.claim(consumers=[EMIT_CONSUMER], batch_size=50, worker_id="bench")
        if (len(emits) // CLAIM_EVERY) % FAIL_EVERY:
            acked += claims.ack(batch.token, batch.ids)
        else:
            claims.nack(batch.token, [claims.Failure(i, verdict) for i in batch.ids])
            failed += len(batch.ids)
    Path(out).write_text(json.dumps({"emits": emits, "acked": acked, "failed": failed}))


def run(config: console.Config, args: argparse.Namespace) -> int:
    env = {**console.child_env(config), "DB_STATEMENT_TIMEOUT": "0"}
    console.create_scratch(config)
    console.seed(config)
    seeded = _count(config, "SELECT count(*) FROM event_log")
    say(f"seeded {seeded:,} events; starting the load")
    with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as tmp:
        out = str(Path(tmp) / "load.json")
        load = subprocess.Popen(
            [sys.executable, __file__, "--load", out], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert load.stdout is not None
            if load.stdout.readline().strip() != "ready":
                raise SystemExit(f"the load child did not start (exit {load.wait()})")
            time.sleep(args.before)  # the load's baseline (not a wait for something to happen)
            say("running manage.py partition_event_log")
            upgrade_started = time.time()
            command = [sys.executable, "manage.py", "partition_event_log", "--batch"]
            result = subprocess.run(
                [*command, str(args.batch)],
                check=False,
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
            )
            upgrade_ended = time.time()
            if result.returncode != 0:
                raise SystemExit(f"partition_event_log failed:\n{result.stdout}{result.stderr}")
            say(result.stdout.strip().splitlines()[-1])
            time.sleep(args.after)
        finally:
            load.send_signal(signal.SIGTERM)
            load.wait(timeout=120)
        done = json.loads(Path(out).read_text())
    return report(config, done, seeded, (upgrade_started, upgrade_ended))


def report(
    config: console.Config, done: dict[str, Any], seeded: int, upgrade: tuple[float, float]
) -> int:
    emits = done["emits"]
    ids = [event_id for _, _, event_id in emits]
    phases: dict[str, list[float]] = {"before": [], "during": [], "after": []}
    for at, ms, _ in emits:
        phase = "before" if at < upgrade[0] else "during" if at <= upgrade[1] else "after"
        phases[phase].append(ms)
    with psycopg.connect(config.scratch_conninfo, options="-c app.rls_bypass=on") as conn:
        found = conn.execute(
            "SELECT count(*), count(DISTINCT id) FROM event_log WHERE id = ANY(%s::uuid[])", [ids]
        ).fetchone()
        total = conn.execute("SELECT count(*) FROM event_log").fetchone()[0]
        problems = {name: conn.execute(query).fetchone()[0] for name, query in CHECKS.items()}
    problems["emitted events missing or twice"] = len(ids) - found[0] + (found[0] - found[1])
    problems["events other than the seeded and the emitted"] = total - seeded - len(ids)
    seconds = upgrade[1] - upgrade[0]
    rows = _rows_copied(config)
    print(f"Online partition upgrade, {seeded:,} events of history (+ {len(ids):,} emitted)")
    print(f"  upgrade: {seconds:.1f} s for {rows:,} rows ({rows / seconds:,.0f} rows/s)")
    base = _percentiles(phases["before"])
    for phase, times in phases.items():
        p50, p95 = _percentiles(times)
        print(
            f"  emit {phase:<6} {len(times):6,} emits  p50 {p50:6.2f} ms  p95 {p95:6.2f} ms"
            f"  (p50 x{p50 / base[0]:.2f} of before)"
        )
    print(f"  the load acked {done['acked']:,} and failed {done['failed']:,} deliveries")
    for name, count in problems.items():
        print(f"  check: {name}: {count} {'OK' if count == 0 else 'FAILED'}")
    during = _percentiles(phases["during"])
    print(f"upgrade_s={seconds:.1f}")
    print(f"upgrade_rows_per_s={rows / seconds:.0f}")
    print(f"emits_during_upgrade={len(phases['during'])}")
    print(f"emit_p50_during_over_before={during[0] / base[0]:.2f}")
    print(f"checks_failed={sum(1 for count in problems.values() if count)}")
    return 1 if any(problems.values()) else 0


def _percentiles(times: list[float]) -> tuple[float, float]:
    if len(times) < 2:
        return (times[0], times[0]) if times else (float("nan"), float("nan"))
    return statistics.median(times), statistics.quantiles(times, n=20)[-1]


def _count(config: console.Config, query: str) -> int:
    with psycopg.connect(config.scratch_conninfo, options="-c app.rls_bypass=on") as conn:
        return int(conn.execute(query).fetchone()[0])


def _rows_copied(config: console.Config) -> int:
    """Rows of the three old tables (what the upgrade copied, or the mirror wrote first)."""
    return _count(
        config,
        "SELECT (SELECT count(*) FROM event_log_unpartitioned)"
        " + (SELECT count(*) FROM eventbus_delivery_unpartitioned)"
        " + (SELECT count(*) FROM eventbus_deliveryattempt_unpartitioned)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["--load"]:
        load_loop(sys.argv[2])
        return 0
    config, args = parse_args(argv)
    os.environ.update(console.child_env(config))
    try:
        return run(config, args)
    finally:
        if not config.keep:
            console.drop_scratch(config)


if __name__ == "__main__":
    raise SystemExit(main())
