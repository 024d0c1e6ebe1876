"""The partitioned event log at scale: emit and claim with a big history, the console, archiving.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/scale.py [--events 10000000] [--emits 400] [--claims 60] [--keep]

What it does, in one run against the scratch database `<DATABASE_URL's name>_bench` (dropped and
re-created, migrated; the base database is never touched):

1. Partitions the empty event log (`eventbus.partitions.upgrade`, monthly partitions from 92 days
   ago to 3 months ahead) and measures, on the empty database: `--emits` single `eventbus.emit`
   calls (each its own transaction), then `--claims` claims of 50 due deliveries (each acked),
   each after a few untimed ones (warm-up); the median of each.
2. Empties the bus tables and seeds `--events` events of history over 90 days for 30
   organizations server-side with `generate_series` (bench/admin_changelists.py's seed: ~1.6
   deliveries per event, 2% dead with attempts, the newest deliveries pending), VACUUM ANALYZE.
3. Measures emit and claim again the same way, and prints each median with its ratio to the
   empty database's (target: within 1.2x).
4. Times the admin DLQ, the event browser and the status page (Django test client, median of 5
   after a warm-up; target under 300 ms).
5. Archives the oldest whole month two ways on the same rows: first writes its files (shared
   cost, timed once), then removes it by the row-delete path (`archive._delete_day` per
   organization-day), puts the same rows back, and removes it by the partition path
   (`archive.archive_month`: read back and count-check the files, delete the deliveries in
   batches, detach and drop the partition). Prints both times and their ratio.

The last lines of stdout are `key=value` figures. `--events 1000000` gives a quick run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench import admin_changelists as console  # noqa: E402
from bench.drain import say, scratch_beside  # noqa: E402

ORGANIZATIONS = 30
CLAIM_BATCH = 50
EMIT_TYPE = "conversation.opened"  # one consumer in bench/admin_consumers.py
EMIT_CONSUMER = "analytics-worker"
RATIO_TARGET = 1.2
WARM_UP = 20  # untimed emits (and a quarter as many claims) first: connection, caches, plans
BUS_TABLES = "event_log, eventbus_delivery, eventbus_deliveryattempt, eventbus_rollup"


@dataclass(frozen=True)
class Options:
    emits: int
    claims: int
    requests: int


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
    args = parser.parse_args(argv)
    if args.events < 1000 or min(args.emits, args.claims, args.requests) < 1:
        parser.error("--events must be at least 1000, the counts positive")
    names = scratch_beside("bench")
    config = console.Config(
        events=args.events,
        requests=args.requests,
        keep=args.keep,
        scratch_url=names["scratch_url"],
        scratch_name=names["scratch_name"],
        scratch_conninfo=names["scratch_conninfo"],
        admin_conninfo=names["admin_conninfo"],
    )
    return config, Options(args.emits, args.claims, args.requests)


def setup_django(config: console.Config, archive_root: str) -> None:
    os.environ.update(console.child_env(config), ARCHIVE_ROOT=archive_root)
    import django

    django.setup()
    from core import rls

    rls.bypass_process()  # a platform process: it emits and claims for every tenant


def partition_empty_log() -> None:
    from eventbus import partitions

    partitions.upgrade()
    now = dt.datetime.now(dt.UTC)
    partitions.ensure_range(now - dt.timedelta(days=92), now)
    say(f"partitions: {', '.join(p.name for p in partitions.partitions())}")


def measure_bus(options: Options) -> BusCost:
    """Median ms of one emit (own transaction), and of one claim of CLAIM_BATCH (then acked)."""
    from django.db import transaction

    import eventbus
    from core.models import Organization
    from eventbus import claim as claims

    orgs = list(Organization.objects.filter(slug__startswith="tenant-").order_by("slug"))
    payload = {"conversation_id": "c", "contact_id": "k", "channel": "whatsapp"}
    emit_times = []
    for i in range(-WARM_UP, options.emits):  # the first WARM_UP are not timed
        started = time.perf_counter()
        with transaction.atomic():
            eventbus.emit(
                EMIT_TYPE,
                organization=orgs[i % len(orgs)],
                entity_kind="conversation",
                payload=payload,
            )
        if i >= 0:
            emit_times.append((time.perf_counter() - started) * 1000)
    backlog = (options.claims + WARM_UP // 4) * CLAIM_BATCH
    for org in orgs:  # enough due work for every timed claim, spread over the tenants
        with transaction.atomic():
            eventbus.emit_many(
                [
                    {"event_type": EMIT_TYPE, "entity_kind": "conversation", "payload": payload}
                    for _ in range(backlog // len(orgs) + 1)
                ],
                organization=org,
            )
    claim_times = []
    for i in range(-WARM_UP // 4, options.claims):
        started = time.perf_counter()
        batch = claims.claim(consumers=[EMIT_CONSUMER], batch_size=CLAIM_BATCH, worker_id="bench")
        if i >= 0:
            claim_times.append((time.perf_counter() - started) * 1000)
        claims.ack(batch.token, [e.delivery_id for e in batch.events])
    return BusCost(statistics.median(emit_times), statistics.median(claim_times))


def seed_organizations(config: console.Config) -> None:
    with psycopg.connect(config.scratch_conninfo, autocommit=True) as conn:
        conn.execute(console.SEED_ORGANIZATIONS_SQL, {"n": ORGANIZATIONS})


def empty_bus(config: console.Config) -> None:
    with psycopg.connect(config.scratch_conninfo, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {BUS_TABLES} CASCADE")  # webhooks_attempt refers to deliveries
        conn.execute("DELETE FROM deskcomm_organization WHERE slug LIKE 'tenant-%%'")


def time_console(config: console.Config) -> dict[str, float]:
    timer = console.Timer(config)
    wanted = {"DLQ changelist", "event changelist", "status page"}
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
    from psycopg import sql

    from eventbus import archive, partitions

    month = next(p for p in partitions.partitions() if _rows_in(p.name))
    name = sql.Identifier(month.name).as_string(connection.connection)
    with connection.cursor() as cursor:
        cursor.execute(sql.SQL(archive.MONTH_DAYS_SQL).format(partition=sql.Identifier(month.name)))
        days = cursor.fetchall()
        cursor.execute(
            f"UPDATE eventbus_delivery SET status = 'done' WHERE event_id IN "
            f"(SELECT id FROM {name}) AND status IN ('pending', 'processing')"
        )
        # The same rows, to put back between the two removals.
        cursor.execute(f"CREATE TABLE bench_events AS SELECT * FROM {name}")
        cursor.execute(
            "CREATE TABLE bench_deliveries AS SELECT d.* FROM eventbus_delivery d"
            f" WHERE d.event_id IN (SELECT id FROM {name})"
        )
        cursor.execute(
            "CREATE TABLE bench_attempts AS SELECT a.* FROM eventbus_deliveryattempt a"
            " WHERE a.delivery_id IN (SELECT id FROM bench_deliveries)"
        )
    rows = sum(n for _, _, n in days)
    say(f"archiving {month.name}: {rows:,} events in {len(days)} organization-days")
    storage = archive.archive_storage()

    def write_files() -> None:
        for org_id, day, _ in days:
            start = archive._day_start(day)
            archive._write_day(storage, org_id, day, start, start + dt.timedelta(days=1))

    def row_delete() -> None:
        for org_id, day, _ in days:
            start = archive._day_start(day)
            archive._delete_day(org_id, start, start + dt.timedelta(days=1))

    files_s = timed(write_files)
    say(f"files written in {files_s:.1f}s; row-delete archive next")
    delete_s = timed(row_delete)
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO event_log SELECT * FROM bench_events")
        cursor.execute("INSERT INTO eventbus_delivery SELECT * FROM bench_deliveries")
        cursor.execute("INSERT INTO eventbus_deliveryattempt SELECT * FROM bench_attempts")
        cursor.execute("DROP TABLE bench_events, bench_deliveries, bench_attempts")
        cursor.execute(f"VACUUM ANALYZE {name}")
        cursor.execute("VACUUM ANALYZE eventbus_delivery")
    say(f"row delete took {delete_s:.1f}s; rows put back; partition detach next")
    report = archive.ArchiveReport()
    detach_s = timed(lambda: archive.archive_month(month, report))
    if report.months != 1:
        raise SystemExit(f"the partition archive did not drop {month.name}: {report}")
    return {"rows": rows, "files_s": files_s, "delete_s": delete_s, "detach_s": detach_s}


def _rows_in(partition: str) -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f'SELECT EXISTS (SELECT 1 FROM "{partition}")')
        return bool(cursor.fetchone()[0])


def main(argv: Sequence[str] | None = None) -> int:
    config, options = parse_args(argv)
    console.create_scratch(config)
    with tempfile.TemporaryDirectory(prefix="bench-scale-archive-") as archive_root:
        try:
            return run(config, options, archive_root)
        finally:
            if "django.db" in sys.modules:
                from django.db import connections

                connections.close_all()
            if not config.keep:
                console.drop_scratch(config)


def run(config: console.Config, options: Options, archive_root: str) -> int:
    setup_django(config, archive_root)
    partition_empty_log()
    seed_organizations(config)
    empty = measure_bus(options)
    say(f"empty database: emit {empty.emit_ms:.2f} ms, claim {empty.claim_ms:.2f} ms")
    empty_bus(config)
    console.seed(config, organizations=ORGANIZATIONS)
    full = measure_bus(options)
    say(f"{config.events:,} events: emit {full.emit_ms:.2f} ms, claim {full.claim_ms:.2f} ms")
    pages = time_console(config)
    months = archive_month_both_ways()
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
        print(f"  {page:<17} {ms:7.1f} ms ({'OK' if ms < console.TARGET_MS else 'MISS'} < 300)")
    print(
        f"  archive of a month ({months['rows']:,} events): files {months['files_s']:.1f}s, "
        f"then row delete {months['delete_s']:.2f}s vs partition detach "
        f"{months['detach_s']:.2f}s (x{months['delete_s'] / months['detach_s']:.1f})"
    )
    print(f"emit_ratio={emit_ratio:.2f}")
    print(f"claim_ratio={claim_ratio:.2f}")
    for page, ms in pages.items():
        print(f"{page.replace(' ', '_').lower()}_ms={ms:.1f}")
    print(f"archive_row_delete_s={months['delete_s']:.2f}")
    print(f"archive_detach_s={months['detach_s']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
