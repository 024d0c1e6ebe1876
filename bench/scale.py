"""The partitioned bus tables at scale: emit and claim with a big history, the console, archiving.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/scale.py [--events 10000000] [--emits 400] [--claims 60] [--keep]

What it does, in one run against the scratch database `<DATABASE_URL's name>_bench` (dropped and
re-created, migrated; the base database is never touched):

1. Partitions the empty log, deliveries and attempts (`eventbus.history.partition_upgrade.upgrade`:
   monthly partitions from 92 days ago to 3 months ahead), adds 30 organizations and copies
   that empty database as `<scratch>_bench_empty` (CREATE DATABASE ... TEMPLATE).
2. Seeds `--events` events of history over 90 days for those 30 organizations server-side with
   `generate_series` (bench/admin_changelists.py's seed: ~1.6 deliveries per event, 2% dead with
   attempts, the newest deliveries pending), VACUUM ANALYZE.
3. Measures emit and claim on both databases in alternating rounds, one `--probe` child process
   each (so both see the same load of this shared machine): `--emits` single `eventbus.emit`
   calls (each its own transaction) and `--claims` claims of 50 due deliveries (each acked),
   after an untimed warm-up. Prints each median and the history/empty ratio (target <= 1.2).
4. Times the admin DLQ, the event browser and the status page (Django test client, median of 5
   after a warm-up; target under 300 ms).
5. Archives the oldest whole month two ways on the same rows: first writes its files (shared
   cost, timed once), then removes it by the row-delete path (`archive.archive_day` per
   organization-day: read the file back and check it, delete the rows in batches), puts the same
   rows back, and removes it by the partition path (`archive.archive_month`: read back and
   count-check the files, detach and drop the month's partitions of the three tables).
   Prints both times, their ratio and where the partition path's time goes.

The last lines of stdout are `key=value` figures. `--events 1000000` gives a quicker run;
`--no-archive` stops after the pages; `--keep` leaves both databases for EXPLAIN.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench import admin_changelists as console  # noqa: E402
from bench.drain import say  # noqa: E402

ORGANIZATIONS = 30
CLAIM_BATCH = 50
EMIT_TYPE = "conversation.opened"  # one consumer in bench/admin_consumers.py
EMIT_CONSUMER = "analytics-worker"
RATIO_TARGET = 1.2
BASELINE = "baseline: admin page (no bus table)"  # the load of the moment, for the pages
WARM_UP = 20  # untimed emits (and a quarter as many claims) first: connection, caches, plans


@dataclass(frozen=True)
class Options:
    emits: int
    claims: int
    requests: int
    archive: bool = True


@dataclass
class BusCost:
    emit_ms: float
    claim_ms: float


def parse_args(argv: Sequence[str] | None) -> tuple[console.Config, Options]:
    parser = argparse.ArgumentParser(description="Partitioned event log at scale.")
    parser.add_argument("--events", type=int, default=10_000_000, help="events of history")
    parser.add_argument("--emits", type=int, default=400, help="timed single emits per phase")
    parser.add_argument("--claims", type=int, default=60, help="timed claims per phase")
    parser.add_argument("--requests", type=int, default=5, help="timed requests per page")
    parser.add_argument("--keep", action="store_true", help="leave the scratch database")
    parser.add_argument("--no-archive", action="store_true", help="skip the month's archive")
    args = parser.parse_args(argv)
    if args.events < 1000 or min(args.emits, args.claims, args.requests) < 1:
        parser.error("--events must be at least 1000, the counts positive")
    config = console.config_beside(
        "bench", events=args.events, requests=args.requests, keep=args.keep
    )
    return config, Options(args.emits, args.claims, args.requests, not args.no_archive)


def setup_django(config: console.Config, archive_root: str) -> None:
    # No statement timeout: the month's row delete is a job's work (the web role's is 20 s).
    os.environ.update(
        console.child_env(config), ARCHIVE_ROOT=archive_root, DB_STATEMENT_TIMEOUT="0"
    )
    import django

    django.setup()
    from core import rls

    rls.bypass_process()  # a platform process: it emits and claims for every tenant


def partition_empty_log() -> None:
    from eventbus.history import partition_upgrade, partitions

    partition_upgrade.upgrade()
    now = dt.datetime.now(dt.UTC)
    partitions.ensure_months(now - dt.timedelta(days=92), now)
    say(f"partitions (of each table): {', '.join(p.name for p in partitions.partitions())}")


def probe_loop() -> None:
    """`--probe`: a child on one database. Reads `emit N`, `claim N` or `backlog N` lines on
    stdin, answers each with a JSON list of per-call ms (emit: one event, own transaction;
    claim: CLAIM_BATCH due deliveries, then acked; backlog: untimed emit_many)."""
    from django.db import transaction

    import eventbus
    from core.models import Organization
    from eventbus.dispatch import claim as claims

    orgs = list(Organization.objects.filter(slug__startswith="tenant-").order_by("slug"))
    payload = {"conversation_id": "c", "contact_id": "k", "channel": "whatsapp"}
    item = {"event_type": EMIT_TYPE, "entity_kind": "conversation", "payload": payload}
    for line in sys.stdin:
        command, count = line.split()
        times = []
        for i in range(int(count)):
            started = time.perf_counter()
            if command == "emit":
                with transaction.atomic():
                    eventbus.emit(
                        EMIT_TYPE,
                        organization=orgs[i % len(orgs)],
                        entity_kind="conversation",
                        payload=payload,
                    )
            elif command == "claim":
                batch = claims.claim(
                    consumers=[EMIT_CONSUMER], batch_size=CLAIM_BATCH, worker_id="bench"
                )
                times.append((time.perf_counter() - started) * 1000)
                claims.ack(batch.token, [e.delivery_id for e in batch.events])
                continue
            else:  # backlog: CLAIM_BATCH events per tenant
                with transaction.atomic():
                    eventbus.emit_many([item] * CLAIM_BATCH, organization=orgs[i % len(orgs)])
            times.append((time.perf_counter() - started) * 1000)
        sys.stdout.write(json.dumps(times) + "\n")
        sys.stdout.flush()


class Probe:
    """A `--probe` child process on one database."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--probe"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, command: str, count: int) -> list[float]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{command} {count}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise SystemExit(f"the probe died during {command!r}")
        times: list[float] = json.loads(answer)
        return times

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def measure_bus(
    options: Options, empty_env: dict[str, str], full_env: dict[str, str]
) -> dict[str, BusCost]:
    """Emit and claim on both databases in alternating rounds (the same machine load for both),
    after an untimed warm-up round each: the median ms per call of each."""
    probes = {"empty": Probe(empty_env), "history": Probe(full_env)}
    rounds = 10
    samples: dict[str, dict[str, list[float]]] = {n: {"emit": [], "claim": []} for n in probes}
    try:
        claims_per_round = max(1, options.claims // rounds)
        for probe in probes.values():  # due work for every claim, and the warm-up
            probe.run("backlog", (options.claims + 2 * claims_per_round) + ORGANIZATIONS)
            probe.run("emit", WARM_UP)
            probe.run("claim", claims_per_round)
        for _ in range(rounds):
            for name, probe in probes.items():
                samples[name]["emit"] += probe.run("emit", max(1, options.emits // rounds))
                samples[name]["claim"] += probe.run("claim", claims_per_round)
    finally:
        for probe in probes.values():
            probe.close()
    return {
        name: BusCost(statistics.median(s["emit"]), statistics.median(s["claim"]))
        for name, s in samples.items()
    }


def clone_empty(config: console.Config, empty_name: str) -> None:
    """The empty, partitioned database as a template copy (before the history is seeded)."""
    from django.db import connections

    connections.close_all()
    with psycopg.connect(config.admin_conninfo, autocommit=True) as conn:
        target, source = sql.Identifier(empty_name), sql.Identifier(config.scratch_name)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(target))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(target, source))


def seed_organizations(config: console.Config) -> None:
    with psycopg.connect(config.scratch_conninfo, autocommit=True) as conn:
        conn.execute(console.SEED_ORGANIZATIONS_SQL, {"n": ORGANIZATIONS})


def time_console(config: console.Config) -> dict[str, float]:
    timer = console.Timer(config)
    wanted = {BASELINE, "DLQ changelist", "event changelist", "status page"}
    measured = {}
    for page in console.pages():
        if page.name in wanted:
            timer.time(page, config.requests)
            measured[page.name] = page.median
            say(f"{page.name}: median {page.median:.1f} ms")
    return measured


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def archive_month_both_ways() -> dict[str, float]:
    """Seconds: files written (shared), row delete, partition detach; and the rows removed."""
    from django.db import connection

    from eventbus.history import archive, partitions

    month = next(p for p in partitions.partitions() if _rows_in(p.name))
    name = sql.Identifier(month.name).as_string(connection.connection)
    deliveries, attempts = (  # the month's partitions of the other two tables
        sql.Identifier(table.partition_name(month.lower)).as_string(connection.connection)
        for table in (partitions.DELIVERIES, partitions.ATTEMPTS)
    )
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL(archive.MONTH_DAYS_SQL).format(partition=sql.Identifier(month.name)))
        days = cursor.fetchall()
        cursor.execute(
            f"UPDATE {deliveries} SET status = 'done' WHERE status IN ('pending', 'processing')"
        )
        # The same rows, to put back between the two removals.
        cursor.execute(f"CREATE TABLE bench_events AS SELECT * FROM {name}")
        cursor.execute(f"CREATE TABLE bench_deliveries AS SELECT * FROM {deliveries}")
        cursor.execute(f"CREATE TABLE bench_attempts AS SELECT * FROM {attempts}")
    rows = sum(n for _, _, n in days)
    say(f"archiving {month.name}: {rows:,} events in {len(days)} organization-days")
    storage = archive.archive_storage()

    def write_files() -> None:
        for org_id, day, _ in days:
            start = archive._day_start(day)
            archive._write_day(storage, org_id, day, start, start + dt.timedelta(days=1))

    def row_delete() -> None:  # each day's file read back and checked, then its rows deleted
        for org_id, day, _ in days:
            archive.archive_day(org_id, day)

    files_s = timed(write_files)
    say(f"files written in {files_s:.1f}s; row-delete archive next")
    delete_s = timed(row_delete)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO event_log SELECT * FROM bench_events")
        cursor.execute("INSERT INTO eventbus_delivery SELECT * FROM bench_deliveries")
        cursor.execute("INSERT INTO eventbus_deliveryattempt SELECT * FROM bench_attempts")
        cursor.execute("DROP TABLE bench_events, bench_deliveries, bench_attempts")
        for table in (name, deliveries, attempts):
            cursor.execute(f"VACUUM ANALYZE {table}")
    say(f"row delete took {delete_s:.1f}s; rows put back; partition detach next")
    report = archive.ArchiveReport()
    parts = {"drop_s": 0.0}  # where the partition path's time goes
    drop = partitions.drop_month

    def timed_drop(lower: dt.datetime) -> list[str]:
        started = time.perf_counter()
        dropped = drop(lower)
        parts["drop_s"] += time.perf_counter() - started
        say(f"dropped {', '.join(dropped)}")
        return dropped

    partitions.drop_month = timed_drop
    try:
        detach_s = timed(lambda: archive.archive_month(month, report))
    finally:
        partitions.drop_month = drop
    if report.months != 1:
        raise SystemExit(f"the partition archive did not drop {month.name}: {report}")
    return {"rows": rows, "files_s": files_s, "delete_s": delete_s, "detach_s": detach_s, **parts}


def _rows_in(partition: str) -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{partition}")')
        return bool(cursor.fetchone()[0])


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and sys.argv[1:] == ["--probe"]:
        import django

        django.setup()
        from core import rls

        rls.bypass_process()
        probe_loop()
        return 0
    config, options = parse_args(argv)
    empty_name = f"{config.scratch_name}_empty"
    console.create_scratch(config)
    with tempfile.TemporaryDirectory(prefix="bench-scale-archive-") as archive_root:
        try:
            return run(config, options, archive_root, empty_name)
        finally:
            if "django.db" in sys.modules:
                from django.db import connections

                connections.close_all()
            if not config.keep:
                console.drop_scratch(config)
                with psycopg.connect(config.admin_conninfo, autocommit=True) as conn:
                    name = sql.Identifier(empty_name)
                    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))


def run(config: console.Config, options: Options, archive_root: str, empty_name: str) -> int:
    setup_django(config, archive_root)
    partition_empty_log()
    seed_organizations(config)
    clone_empty(config, empty_name)
    console.seed(config, organizations=ORGANIZATIONS, existing_organizations=True)
    full_env = console.child_env(config)
    empty_url = urlunsplit(urlsplit(config.scratch_url)._replace(path="/" + quote(empty_name)))
    costs = measure_bus(options, {**full_env, "DATABASE_URL": empty_url}, full_env)
    empty, full = costs["empty"], costs["history"]
    say(f"empty database: emit {empty.emit_ms:.2f} ms, claim {empty.claim_ms:.2f} ms")
    say(f"{config.events:,} events: emit {full.emit_ms:.2f} ms, claim {full.claim_ms:.2f} ms")
    pages = time_console(config)
    emit_ratio, claim_ratio = full.emit_ms / empty.emit_ms, full.claim_ms / empty.claim_ms
    print(f"Partitioned event log, {config.events:,} events of history, {ORGANIZATIONS} tenants")
    print(
        f"  emit   empty {empty.emit_ms:7.2f} ms  history {full.emit_ms:7.2f} ms  "
        f"x{emit_ratio:.2f} (target <= {RATIO_TARGET})"
    )
    print(
        f"  claim  empty {empty.claim_ms:7.2f} ms  history {full.claim_ms:7.2f} ms  "
        f"x{claim_ratio:.2f} (target <= {RATIO_TARGET}; {CLAIM_BATCH} per claim)"
    )
    for page, ms in pages.items():
        verdict = "" if page == BASELINE else ("OK" if ms < console.TARGET_MS else "MISS")
        print(f"  {page:<36} {ms:7.1f} ms  x{ms / pages[BASELINE]:.1f} baseline  {verdict}")
    print(f"emit_ratio={emit_ratio:.2f}")
    print(f"claim_ratio={claim_ratio:.2f}")
    for page, ms in pages.items():
        if page != BASELINE:
            print(f"{page.replace(' ', '_').lower()}_ms={ms:.1f}")
    sys.stdout.flush()
    if not options.archive:
        return 0
    months = archive_month_both_ways()
    print(
        f"  archive of a month ({months['rows']:,} events): files {months['files_s']:.1f}s, "
        f"then row delete {months['delete_s']:.2f}s vs partition detach "
        f"{months['detach_s']:.2f}s (x{months['delete_s'] / months['detach_s']:.1f})"
    )
    print(
        f"    partition path: detach + drop of the log's, deliveries' and attempts' partitions "
        f"{months['drop_s']:.2f}s, the rest reading the files back"
    )
    print(f"archive_row_delete_s={months['delete_s']:.2f}")
    print(f"archive_detach_s={months['detach_s']:.2f}")
    print(f"archive_detach_ratio={months['delete_s'] / months['detach_s']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
