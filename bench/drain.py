"""Event bus throughput benchmark: emit, drain, and a raw-SQL ceiling on the same server.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/drain.py [--events N] [--repeat K] [--batch-size B] [--quick]

What it measures (all in one run, against one PostgreSQL server):

1. Emit, 3 consumers per event type (each event writes 1 event row + 3 deliveries), events/s:
   - `eventbus.emit` called N times inside one `transaction.atomic()` (the commit is timed);
   - `eventbus.emit_many` in chunks of `--emit-chunk` items, one transaction per chunk.
   The organization is passed as a model instance (no lookup per call); payloads and entity ids
   are built before the clock starts.
   Their raw-SQL baselines, bare psycopg on the same server (bench/raw_inserts.py): a loop of
   single-row INSERTs into a plain table in one transaction (for `emit`), the same event and
   delivery rows one statement per event (reference), and the same rows as two multi-row
   INSERTs per chunk (for `emit_many`).
2. Drain, no-op consumers, deliveries/s: N events are emitted (untimed) for 1 consumer (N
   deliveries) or 3 consumers (3N deliveries), then 1 or 2 worker processes run the real
   `drain_events` command (`--once --no-listen --batch-size B --consumer ...`, restricted to
   the consumers measured). Each process loads Django first and then waits for a start signal
   (see bench/workers.py), so interpreter and Django start-up are NOT timed; the clock runs from
   the start signal to the moment the last process returned from the command. That window does
   include what the command does before its first claim: `sync_routes()`, the worker's random
   start-up jitter (0-0.25 s), opening the connection, and the final empty claim. The steady
   window (first claim -> last ack that changed rows, measured inside the processes) is shown
   separately, with where the processes spent it (claim / ack statements / the rest, i.e.
   Python dispatch plus the loop's own statements). For reference the run also times a complete
   `manage.py drain_events --once` on an empty queue (everything that was excluded).
   `o21` drains one consumer declared `ordered=True` (2 processes): the same N events spread
   round robin over 200 conversations (bench_consumers.ORDERED_KEYS), so at most one delivery
   per conversation runs at a time; its ratio to `d21` (the unordered consumer, same run) is
   printed as `ordered_ratio_to_unordered`.
   Handlers that write (issue 49), 2 processes, 3 consumers per event (3N deliveries), each
   delivery bumping one row of `bench_write` (bench/bench_consumers.py): `plain-write` (one
   autocommit `INSERT ... ON CONFLICT DO UPDATE` per delivery through Django's connection),
   `atomic-write` (the same INSERT inside the ack's transaction, `atomic=True`: a claim's
   deliveries run EVENTBUS_ATOMIC_GROUP at a time in one transaction, savepoints only after a
   failure; `atomic-write-1` is the same with the group set to 1, a transaction per delivery) and
   `batch-write` (a `batch=` consumer writing each batch of events in one statement, acked in
   its transaction). Their floors, measured in the same run: `d23` (the no-op drain, same
   processes and consumers) and `bare-insert` (the same INSERT, autocommit, in a bare psycopg
   loop on as many connections, 3N statements). The target lines give each write figure over
   the combined floor 1 / (1/d23 + 1/bare-insert) (what the two parts add up to, if nothing
   overlapped), and `batch-write` over `d23` itself. `plain-write-8` is `plain-write` with
   `--concurrency 8` (8 handler threads per process, what docs/handlers-that-write.md advises
   for handlers that wait on the database), over its own floor: `bare-insert-16`, the same
   INSERT on 16 connections (as many as its handler threads). The header says whether the server
   runs with fsync on: a commit per delivery costs far more with it, and figures without it are not
   what a production server does.
3. `bus2`, the bus's SQL alone, deliveries/s: the drain's own `claim.sql` and `ack.sql`, with the
   parameters `eventbus.dispatch.claim` passes, run by 2 bare psycopg processes on the same backlog
   as `d21` (bench/workers.py `bus`): no Django, no Event objects, no handler between them. Its
   ratio to the ceiling is the most any drain using these statements on this schema can reach;
   `d21` over it is the share the worker's Python keeps.
4. Raw-SQL ceiling, rows/s: the same number of rows (N) in a plain logged table
   `bench_raw_job(id bigserial, status text, payload jsonb, next_at timestamptz)` with a partial
   index on pending rows, drained by 1 or 2 bare psycopg processes that claim B rows with
   `UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP LOCKED LIMIT B)) RETURNING` and
   ack them with one `UPDATE ... WHERE id = ANY(%s)` (same start protocol and batch size).

How to read it: every figure is the median of `--repeat` runs (the individual runs are listed),
and the last column divides it by the ceiling (raw SQL, 2 processes). The last lines of stdout
are the target ratios, `<name>=<x>` (TARGETS): emit / single-row INSERT loop, emit_many / bulk
INSERT of the same rows, drain deliveries/s (2 processes, 1 consumer) / raw rows/s (2 processes).

Isolation: `DATABASE_URL` (default as in deskcomm/settings.py) only names the server and a base
name; nothing is read from or written to that database. The benchmark drops and re-creates
`<dbname>_bench` on the same server, migrates it with `manage.py migrate`, and runs everything
there (bench consumers come from bench/bench_consumers.py via `EVENTBUS_HANDLER_MODULES`). The
scratch database is left in place afterwards for inspection and dropped by the next run.
Before every measurement the bus tables are truncated, the backlog (if any) is written, and the
tables are VACUUM ANALYZEd and CHECKPOINTed so that every run starts from the same state.
Progress goes to stderr, the result tables to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import environ
import psycopg
from psycopg import sql

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench import bench_consumers, raw_inserts  # noqa: E402  (needs the sys.path line above)
from bench.workers import RAW_TABLE  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/deskcomm"  # as deskcomm/settings.py
BENCH_MODULE = "bench.bench_consumers"
FILL_CHUNK = 2000
WORKER_TIMEOUT = 900.0
BUS_TABLES = ("event_log", "eventbus_delivery", "eventbus_deliveryattempt")
MEASUREMENT_KEYS = (
    "emit",
    "insert1",
    "insert_rows",
    "emit_many",
    "insert_many",
    "d11",
    "d21",
    "d13",
    "d23",
    "o21",
    "bare-insert",
    "plain-write",
    "bare-insert-16",
    "plain-write-8",
    "plain-write-1",
    "atomic-write",
    "atomic-write-1",
    "batch-write",
    "bus2",
    "raw1",
    "raw2",
)
# Target ratios of the issue #23 (numerator, denominator, target), printed with the results.
TARGETS = (
    ("emit_ratio_to_insert", "emit", "insert1", 0.30),
    ("emit_many_ratio_to_bulk_insert", "emit_many", "insert_many", 0.60),
    ("drain_ratio_to_raw", "d21", "raw2", 0.45),
)

# The write benchmarks of issue 49: (key, target, what the target is a ratio to). A bare loop's
# key names the combined floor 1 / (1/d23 + 1/<bare loop>): the no-op drain and the bare write
# loop on as many connections as the drain's handler threads, added up; "d23" the no-op drain.
WRITE_CONCURRENCY = 8  # plain-write-8: drain_events --concurrency 8 (2 x 8 handler connections)
# The drains run with drain_events's default `--concurrency auto`: one handler thread, growing to
# 8 while plain handlers wait on I/O, so the plain write drain's floor is the loop on 16
# connections; atomic and batch consumers stay on one thread (2 connections for 2 processes).
WRITE_TARGETS = (
    ("plain-write", 0.6, "bare-insert-16"),
    ("plain-write-8", 0.6, "bare-insert-16"),
    ("atomic-write", 0.7, "bare-insert"),
    ("batch-write", 0.8, "d23"),
    ("atomic-write-1", 0.7, "bare-insert"),  # a transaction per atomic delivery, as before 49
    ("plain-write-1", 0.6, "bare-insert"),  # one handler thread, the default before auto
)

# Ratios printed for understanding, not as targets: (issue, numerator, denominator, name, what
# it means). The SQL alone over the ceiling is the most any drain with these statements reaches;
# the drain over the SQL alone is what the worker's Python keeps of it.
DIAGNOSTICS = (
    ("issue #17", "o21", "d21", "ordered_ratio_to_unordered", ""),
    (
        "issue #23",
        "bus2",
        "raw2",
        "drain_sql_ratio_to_raw",
        " (the most any drain with these statements reaches)",
    ),
    ("issue #23", "d21", "bus2", "drain_ratio_to_sql", " (what the worker's Python keeps of it)"),
)

_T0 = time.monotonic()


def say(message: str) -> None:
    """Progress line on stderr, with the time since start."""
    sys.stderr.write(f"[bench {time.monotonic() - _T0:7.1f}s] {message}\n")
    sys.stderr.flush()


class BenchError(Exception):
    """The benchmark could not run, or a run did not leave every delivery done."""


# -- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    events: int
    repeat: int
    batch_size: int
    emit_chunk: int
    only: tuple[str, ...]  # the measurements to run
    base_url: str
    scratch_url: str
    scratch_name: str
    scratch_conninfo: str
    admin_conninfo: str


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(
        description="Emit/drain throughput of the event bus vs a raw-SQL ceiling.",
        epilog="See the module docstring (bench/drain.py) for what each figure means.",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=None,
        help="events per measurement (default 20000; 2000 with --quick)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="runs per measurement, median reported (default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=1000,
        help="claim size for drain_events and the raw loop (default 1000)",
    )
    parser.add_argument(
        "--emit-chunk",
        type=int,
        default=1000,
        help="items per emit_many call / transaction (default 1000)",
    )
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated measurements to run, of "
        + ", ".join(MEASUREMENT_KEYS)
        + " (the ceiling raw2 always runs; the last line needs d21)",
    )
    args = parser.parse_args(argv)
    only = tuple(k for k in args.only.replace(" ", "").split(",") if k)
    unknown = sorted(set(only) - set(MEASUREMENT_KEYS))
    if unknown:
        parser.error(f"--only: unknown measurement(s) {', '.join(unknown)}")
    events = args.events or (2000 if args.quick else 20000)
    repeat = args.repeat or (1 if args.quick else 3)
    if events < 1 or repeat < 1 or args.batch_size < 1 or args.emit_chunk < 1:
        parser.error("--events, --repeat, --batch-size and --emit-chunk must be positive")

    try:
        scratch = scratch_beside("bench")
    except BenchError as exc:
        parser.error(str(exc))
    return Config(
        events=events,
        repeat=repeat,
        batch_size=args.batch_size,
        emit_chunk=args.emit_chunk,
        only=(*only, "raw2") if only else MEASUREMENT_KEYS,
        **scratch,
    )


def scratch_beside(suffix: str) -> dict[str, str]:
    """The Config fields of a benchmark's scratch database `<DATABASE_URL's name>_<suffix>` on
    the same server: base_url, scratch_name, scratch_url, scratch_conninfo, admin_conninfo."""
    base_url = database_url()
    parts = urlsplit(base_url)
    base_name = parts.path.lstrip("/")
    if not base_name:
        raise BenchError(f"DATABASE_URL {base_url!r} names no database")
    scratch_name = f"{base_name}_{suffix}"
    scratch_url = urlunsplit(parts._replace(path="/" + quote(scratch_name)))
    return {
        "base_url": base_url,
        "scratch_name": scratch_name,
        "scratch_url": scratch_url,
        "scratch_conninfo": libpq_conninfo(scratch_url),
        "admin_conninfo": libpq_conninfo(scratch_url, dbname="postgres"),
    }


def database_url() -> str:
    """`DATABASE_URL` the way the settings read it (environment, then `.env`, then default)."""
    environ.Env.read_env(REPO_ROOT / ".env", overwrite=False)
    return os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL


def libpq_conninfo(url: str, *, dbname: str | None = None) -> str:
    """A libpq connection string for a django-environ database URL (any postgres scheme)."""
    config = environ.Env.db_url_config(url)
    params: dict[str, Any] = {
        "dbname": dbname or config.get("NAME"),
        "user": config.get("USER"),
        "password": config.get("PASSWORD"),
        "host": config.get("HOST"),
        "port": config.get("PORT"),
        **config.get("OPTIONS", {}),
    }
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v})


def child_env(config: Config) -> dict[str, str]:
    """Environment for every process that touches the scratch database."""
    return scratch_env(config.scratch_url, BENCH_MODULE)


def scratch_env(scratch_url: str, handler_module: str) -> dict[str, str]:
    """This environment pointed at a scratch database, with a benchmark's consumers loaded."""
    env = dict(os.environ)
    configured = env.get("EVENTBUS_HANDLER_MODULES", "").split(",")
    extra = [m for m in configured if m and m != handler_module]
    env.update(
        {
            "DATABASE_URL": scratch_url,
            "EVENTBUS_HANDLER_MODULES": ",".join([handler_module, *extra]),
            "DJANGO_SETTINGS_MODULE": "deskcomm.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
        }
    )
    return env


# -- the scratch database -----------------------------------------------------------------


def lock_scratch(config: Config) -> psycopg.Connection[Any]:
    """Hold a session advisory lock named after the scratch database for the whole run.

    A second run against the same scratch database would drop it under the first one; it fails
    here instead. The lock goes away with the returned connection (close it, or exit).
    """
    conn = psycopg.connect(config.admin_conninfo, autocommit=True)
    key = f"bench:{config.scratch_name}"
    row = conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (key,)).fetchone()
    if not row or not row[0]:
        conn.close()
        raise BenchError(f"another benchmark run is using {config.scratch_name}; try again later")
    return conn


def recreate_scratch(config: Config) -> None:
    say(f"re-creating scratch database {config.scratch_name} (base {config.base_url})")
    recreate_database(config.admin_conninfo, config.scratch_name, child_env(config))


def recreate_database(
    admin_conninfo: str, scratch_name: str, env: dict[str, str], *, root: Path = REPO_ROOT
) -> None:
    """Drop and create `scratch_name`, then migrate it (with `env`) by the checkout `root`.

    The previous run's processes may still be closing their sessions (another role's, which
    FORCE may not end): the drop is tried again for up to 30 s while it is refused for them."""
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        name = sql.Identifier(scratch_name)
        deadline = time.monotonic() + 30
        while True:
            try:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
                break
            except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
                if time.monotonic() > deadline:
                    raise
                say(f"{scratch_name}: sessions of the last run still open; trying again")
                time.sleep(1)
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    say("migrating the scratch database (manage.py migrate)")
    result = subprocess.run(
        [sys.executable, str(root / "manage.py"), "migrate", "--noinput", "-v", "0"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise BenchError(f"migrate failed ({result.returncode}):\n{result.stdout}{result.stderr}")


def setup_django(config: Config) -> ModuleType:
    """Point this process at the scratch database, with the bench consumers, and load Django.

    Returns bench/bus_ops.py, which can only be imported once Django is set up.
    """
    os.environ.update(child_env(config))
    import django

    django.setup()
    from bench import bus_ops
    from core import rls

    rls.bypass_process()  # a platform process: it emits for the bench's tenants directly

    return bus_ops


class Admin:
    """An autocommit psycopg connection to the scratch database for resets and checks."""

    def __init__(self, conninfo: str) -> None:
        self.conn = psycopg.connect(conninfo, autocommit=True)

    def close(self) -> None:
        self.conn.close()

    def rows(self, query: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(query, params).fetchall()

    def reset_bus(self) -> None:
        self.conn.execute(f"TRUNCATE {', '.join(BUS_TABLES)} CASCADE")
        self.settle()

    def settle(self, tables: Sequence[str] = BUS_TABLES) -> None:
        for table in tables:
            self.conn.execute(f"VACUUM ANALYZE {table}")
        self.conn.execute("CHECKPOINT")


# -- measurements -------------------------------------------------------------------------


@dataclass
class Sample:
    """One run of one measurement."""

    count: int  # events, deliveries or rows
    seconds: float
    steady_seconds: float | None = None
    claim_s: float | None = None  # summed over processes
    ack_s: float | None = None
    busy_s: float | None = None  # summed steady windows of the processes
    claims: int | None = None
    peak_rss_mb: float | None = None  # the largest peak RSS of the run's worker processes

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    @property
    def steady_rate(self) -> float | None:
        return self.count / self.steady_seconds if self.steady_seconds else None


@dataclass
class Measurement:
    key: str
    label: str
    procs: str
    consumers: str
    unit: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(s.rate for s in self.samples)

    def median_sample(self) -> Sample:
        ordered = sorted(self.samples, key=lambda s: s.rate)
        return ordered[(len(ordered) - 1) // 2]


class Bench:
    def __init__(self, config: Config, ops: ModuleType) -> None:
        self.config = config
        self.ops = ops
        self.admin = Admin(config.scratch_conninfo)
        self.org = ops.create_organization()
        self.env = child_env(config)

    # emit ----------------------------------------------------------------------------------

    def emit_loop(self) -> Sample:
        self.admin.reset_bus()
        batch = self.ops.items(bench_consumers.FANOUT_EVENT, self.config.events)
        elapsed = self.ops.emit_loop(self.org, batch)
        self._check_emitted(len(batch), len(bench_consumers.FANOUT_CONSUMERS))
        return Sample(len(batch), elapsed)

    def emit_many(self) -> Sample:
        self.admin.reset_bus()
        batch = self.ops.items(bench_consumers.FANOUT_EVENT, self.config.events)
        elapsed = self.ops.emit_many(self.org, batch, self.config.emit_chunk)
        self._check_emitted(len(batch), len(bench_consumers.FANOUT_CONSUMERS))
        return Sample(len(batch), elapsed)

    def _check_emitted(self, events: int, fanout: int) -> None:
        found = self.admin.rows(
            "SELECT (SELECT count(*) FROM event_log), (SELECT count(*) FROM eventbus_delivery)"
        )[0]
        if found != (events, events * fanout):
            raise BenchError(
                f"emit wrote {found} (events, deliveries), expected {(events, events * fanout)}"
            )

    def insert1(self) -> Sample:
        self.admin.conn.execute(f"TRUNCATE {RAW_TABLE} RESTART IDENTITY")
        self.admin.settle([RAW_TABLE])
        batch = self.ops.items(bench_consumers.FANOUT_EVENT, self.config.events)
        return Sample(len(batch), raw_inserts.single_row_loop(self.config.scratch_conninfo, batch))

    def insert_rows(self) -> Sample:
        self.admin.reset_bus()
        batch = self.ops.items(bench_consumers.FANOUT_EVENT, self.config.events)
        consumers = bench_consumers.FANOUT_CONSUMERS
        elapsed = raw_inserts.event_rows_loop(
            self.config.scratch_conninfo, self.org.pk, batch, consumers
        )
        self._check_emitted(len(batch), len(consumers))
        return Sample(len(batch), elapsed)

    def insert_many(self) -> Sample:
        self.admin.reset_bus()
        batch = self.ops.items(bench_consumers.FANOUT_EVENT, self.config.events)
        consumers = bench_consumers.FANOUT_CONSUMERS
        elapsed = raw_inserts.event_rows_bulk(
            self.config.scratch_conninfo, self.org.pk, batch, consumers, self.config.emit_chunk
        )
        self._check_emitted(len(batch), len(consumers))
        return Sample(len(batch), elapsed)

    def fill(self, event_type: str) -> None:
        """Emit the backlog (untimed), then settle the tables."""
        self.admin.reset_bus()
        self.ops.emit_many(self.org, self.ops.items(event_type, self.config.events), FILL_CHUNK)
        self.admin.settle()

    # drain ---------------------------------------------------------------------------------

    def drain(
        self,
        procs: int,
        event_type: str,
        env: dict[str, str] | None = None,
        *,
        concurrency: int | None = None,
    ) -> Sample:
        names = bench_consumers.consumers_for(event_type)
        expected = self.config.events * len(names)
        self.fill(event_type)
        args = ["--once", "--no-listen", "--batch-size", str(self.config.batch_size)]
        if concurrency is not None:  # else drain_events's default (auto)
            args += ["--concurrency", str(concurrency)]
        for name in names:
            args += ["--consumer", name]
        command = [sys.executable, "-m", "bench.workers", "drain", "--", *args]
        wall, probes = run_workers([command] * procs, {**self.env, **(env or {})})
        self._verify_drain(expected, probes)
        return sample_from(expected, wall, probes)

    def _verify_drain(self, expected: int, probes: list[dict[str, Any]]) -> None:
        deliveries = self.admin.rows(
            "SELECT status, count(*), min(attempts), max(attempts) FROM eventbus_delivery "
            "GROUP BY status ORDER BY status"
        )
        events = self.admin.rows("SELECT status, count(*) FROM event_log GROUP BY status")
        acked = sum(p["acked"] for p in probes)
        claimed = sum(p["claimed"] for p in probes)
        problems = []
        if deliveries != [("done", expected, 1, 1)]:
            problems.append(f"deliveries by status (count, min/max attempts): {deliveries}")
        if events != [("done", self.config.events)]:
            problems.append(f"events by status: {events}")
        if acked != expected or claimed != expected:
            problems.append(f"workers claimed {claimed} and acked {acked}")
        if problems:
            raise BenchError(
                f"drain left work not done (expected {expected} deliveries done, "
                "each attempted once): " + "; ".join(problems)
            )

    def bus_sql(self, procs: int) -> Sample:
        """The drain's own claim and ack statements in bare psycopg loops (no Python between
        them): what this schema and these statements allow, on the same backlog as `d21`."""
        names = bench_consumers.SINGLE_CONSUMERS
        expected = self.config.events * len(names)
        self.fill(bench_consumers.SINGLE_EVENT)
        command = [sys.executable, "-m", "bench.workers", "bus"]
        command += ["--conninfo", self.config.scratch_conninfo]
        command += ["--batch-size", str(self.config.batch_size)]
        for name in names:
            command += ["--consumer", name]
        wall, probes = run_workers([command] * procs, self.env)
        self._verify_drain(expected, probes)
        return sample_from(expected, wall, probes)

    def startup_reference(self) -> float:
        """Wall time of a complete `manage.py drain_events --once` on an empty queue."""
        self.admin.reset_bus()
        command = [
            sys.executable,
            str(REPO_ROOT / "manage.py"),
            "drain_events",
            "--once",
            "--no-listen",
            "--batch-size",
            str(self.config.batch_size),
            "--consumer",
            bench_consumers.SINGLE_CONSUMERS[0],
        ]
        started = time.perf_counter()
        result = subprocess.run(
            command, cwd=REPO_ROOT, env=self.env, timeout=WORKER_TIMEOUT, check=False
        )
        elapsed = time.perf_counter() - started
        if result.returncode != 0:
            raise BenchError(f"`{' '.join(command)}` exited {result.returncode}")
        return elapsed

    # raw -----------------------------------------------------------------------------------

    def create_write_table(self) -> None:
        self.admin.conn.execute(f"DROP TABLE IF EXISTS {bench_consumers.WRITE_TABLE}")
        self.admin.conn.execute(bench_consumers.WRITE_TABLE_SQL)

    def _reset_writes(self) -> None:
        self.admin.conn.execute(f"TRUNCATE {bench_consumers.WRITE_TABLE}")
        self.admin.settle([bench_consumers.WRITE_TABLE])

    def write_drain(
        self, mode: str, env: dict[str, str] | None = None, *, concurrency: int | None = None
    ) -> Sample:
        """2 drain processes, 3 consumers whose handlers write (see the module docstring)."""
        self._reset_writes()
        sample = self.drain(2, bench_consumers.WRITE_EVENTS[mode], env, concurrency=concurrency)
        self._check_writes(sample.count)
        return sample

    def bare_insert(self, procs: int) -> Sample:
        """The write handlers' INSERT in bare autocommit loops: 3N statements over `procs`."""
        self._reset_writes()
        names = bench_consumers.WRITE_CONSUMERS["plain"]
        commands = [
            [sys.executable, "-m", "bench.workers", "insert"]
            + ["--conninfo", self.config.scratch_conninfo, "--count", str(self.config.events)]
            + ["--part", str(part), "--parts", str(procs)]
            + [arg for name in names for arg in ("--consumer", name)]
            for part in range(procs)
        ]
        wall, probes = run_workers(commands, self.env)
        count = self.config.events * len(names)
        self._check_writes(count)
        return sample_from(count, wall, probes)

    def _check_writes(self, count: int) -> None:
        [(written,)] = self.admin.rows(f"SELECT sum(n) FROM {bench_consumers.WRITE_TABLE}")
        if written != count:
            raise BenchError(f"the write handlers wrote {written} times, expected {count}")

    def durability(self) -> dict[str, str]:
        """The server's durability settings (a commit per delivery costs far more with fsync)."""
        names = ("fsync", "synchronous_commit", "full_page_writes")
        return {name: self.admin.rows(f"SHOW {name}")[0][0] for name in names}

    def create_raw_table(self) -> None:
        self.admin.conn.execute(f"DROP TABLE IF EXISTS {RAW_TABLE}")
        self.admin.conn.execute(
            f"CREATE TABLE {RAW_TABLE} (id bigserial PRIMARY KEY, status text NOT NULL, "
            "payload jsonb NOT NULL, next_at timestamptz NOT NULL)"
        )
        self.admin.conn.execute(
            f"CREATE INDEX {RAW_TABLE}_pending_idx ON {RAW_TABLE} (next_at) "
            "WHERE status = 'pending'"
        )

    def raw(self, procs: int) -> Sample:
        n = self.config.events
        self.admin.conn.execute(f"TRUNCATE {RAW_TABLE} RESTART IDENTITY")
        self.admin.conn.execute(
            f"INSERT INTO {RAW_TABLE} (status, payload, next_at) "
            "SELECT 'pending', jsonb_build_object('seq', g, 'note', 'benchmark'), now() "
            "FROM generate_series(1, %s) g",
            (n,),
        )
        self.admin.settle([RAW_TABLE])
        command = [
            sys.executable,
            "-m",
            "bench.workers",
            "raw",
            "--conninfo",
            self.config.scratch_conninfo,
            "--batch-size",
            str(self.config.batch_size),
        ]
        wall, probes = run_workers([command] * procs, self.env)
        left = self.admin.rows(f"SELECT status, count(*) FROM {RAW_TABLE} GROUP BY status")
        acked = sum(p["acked"] for p in probes)
        if left != [("done", n)] or acked != n:
            raise BenchError(f"raw loop left {left} (acked {acked}), expected {n} done")
        return sample_from(n, wall, probes)


def run_workers(
    commands: Sequence[Sequence[str]], env: dict[str, str], *, cwd: Path = REPO_ROOT
) -> tuple[float, list[dict[str, Any]]]:
    """Start the processes (in `cwd`), wait until all are ready, signal them, wait for their
    results.

    Returns the wall time from the start signal to the latest `t_end`, and each result.
    """
    procs = [
        subprocess.Popen(list(cmd), cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        for cmd in commands
    ]
    try:
        for proc in procs:
            line = proc.stdout.readline() if proc.stdout else b""
            if not line or not json.loads(line).get("ready"):
                raise BenchError(f"worker {proc.args} did not start (exit {proc.wait()})")
        started = time.monotonic()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"g")
            proc.stdin.flush()
        results = []
        for proc in procs:
            out, _ = proc.communicate(timeout=WORKER_TIMEOUT)
            if proc.returncode != 0:
                raise BenchError(f"worker {proc.args} exited {proc.returncode}")
            results.append(json.loads(out.decode().strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return max(r["t_end"] for r in results) - started, results


def sample_from(count: int, wall: float, probes: list[dict[str, Any]]) -> Sample:
    firsts = [p["first_claim"] for p in probes if p["first_claim"] is not None]
    lasts = [p["last_ack"] for p in probes if p["last_ack"] is not None]
    steady = max(lasts) - min(firsts) if firsts and lasts else None
    busy = sum(
        p["last_ack"] - p["first_claim"]
        for p in probes
        if p["last_ack"] is not None and p["first_claim"] is not None
    )
    return Sample(
        count,
        wall,
        steady_seconds=steady,
        claim_s=sum(p["claim_s"] for p in probes),
        ack_s=sum(p["ack_s"] for p in probes),
        busy_s=busy,
        claims=sum(p["claims"] for p in probes),
        # (absent from the probes of a baseline checkout's workers in bench/ab.py)
        peak_rss_mb=max((p["peak_rss_mb"] for p in probes if "peak_rss_mb" in p), default=None),
    )


# -- report -------------------------------------------------------------------------------


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def render(
    measurements: list[Measurement],
    ceiling: float,
    config: Config,
    startup: list[float],
    load: tuple[float, float],
    durability: dict[str, str],
) -> str:
    lines = [
        f"Event bus throughput: {config.events:,} events per measurement, median of "
        f"{config.repeat} run(s), batch size {config.batch_size}, emit_many chunk "
        f"{config.emit_chunk}, scratch database {config.scratch_name}",
        f"{os.cpu_count()} CPUs; 1-minute load average {load[0]:.2f} before the run, "
        f"{load[1]:.2f} after (other work on the machine inflates the spread of the runs)",
        "server durability: " + ", ".join(f"{k} {v}" for k, v in durability.items()),
        "",
    ]
    header = (
        f"{'measurement':<44} {'procs':>5} {'consumers':>9} {'unit':<13} "
        f"{'median':>9}  {'runs':<28} {'÷ ceiling':>9}"
    )
    lines += [header, "-" * len(header)]
    for m in measurements:
        runs = " / ".join(fmt_rate(s.rate) for s in m.samples)
        lines.append(
            f"{m.label:<44} {m.procs:>5} {m.consumers:>9} {m.unit:<13} "
            f"{fmt_rate(m.median):>9}  {runs:<28} {m.median / ceiling:>9.2f}"
        )
    lines += ["", "Inside the worker processes (the median run of each measurement):", ""]
    header = (
        f"{'measurement':<44} {'procs':>5} {'consumers':>9} {'steady/s':>9} "
        f"{'÷ ceiling':>9} {'outside loop':>12} {'claim':>6} {'ack':>6} {'other':>6} "
        f"{'claims':>6} {'peak RSS':>9}"
    )
    lines += [header, "-" * len(header)]
    for m in measurements:
        s = m.median_sample()
        if s.steady_rate is None or not s.busy_s:
            continue
        claim = (s.claim_s or 0) / s.busy_s
        ack = (s.ack_s or 0) / s.busy_s
        lines.append(
            f"{m.label:<44} {m.procs:>5} {m.consumers:>9} {fmt_rate(s.steady_rate):>9} "
            f"{s.steady_rate / ceiling:>9.2f} {s.seconds - (s.steady_seconds or 0):>11.2f}s "
            f"{claim:>6.0%} {ack:>6.0%} {1 - claim - ack:>6.0%} {s.claims:>6} "
            f"{s.peak_rss_mb or 0:>6.1f} MB"
        )
    lines += [
        "",
        "steady/s: count / (first claim -> last ack that changed rows), across the processes.",
        "outside loop: wall - steady window (sync_routes, start-up jitter <= 0.25 s, connect,",
        "  final empty claim, exit). claim/ack/other: share of the processes' steady time spent",
        "  in the claim statement, the ack statement, and everything else (Python dispatch,",
        "  connection checks). peak RSS: the largest peak resident set (VmHWM) of one worker",
        "  process of that run (target < 80 MB per drain worker).",
        f"Excluded from every drain figure: a complete `manage.py drain_events --once` on an empty"
        f" queue takes {statistics.median(startup):.2f} s (median of "
        f"{', '.join(f'{x:.2f}' for x in startup)}; interpreter + Django + checks + the above).",
    ]
    return "\n".join(lines)


def render_writes(by_key: dict[str, Measurement], durability: dict[str, str]) -> str:
    """Handlers that write (issue 49): each write drain beside its floors of the same run, run
    by run (interleaved: run i of each was measured within minutes of run i of the others)."""
    if not any(key in by_key for key, _, _ in WRITE_TARGETS):
        return ""
    lines = [
        "",
        f"Handlers that write (issue 49), 2 processes x 3 consumers, server fsync "
        f"{durability.get('fsync', '?')}:",
    ]
    noop = by_key.get("d23")
    if noop is None:
        lines.append("  (run d23 and bare-insert too for the floors and ratios)")
        return "\n".join(lines)
    floors = {"d23": [s.rate for s in noop.samples]}
    found = []
    for bare_key in ("bare-insert", "bare-insert-16"):
        bare = by_key.get(bare_key)
        if bare is None:
            continue
        floors[bare_key] = [
            1 / (1 / n.rate + 1 / b.rate) for n, b in zip(noop.samples, bare.samples, strict=True)
        ]
        lines.append(
            f"  floors per run ({bare.procs} connections): no-op d23 "
            + " / ".join(fmt_rate(s.rate) for s in noop.samples)
            + "; bare INSERT "
            + " / ".join(fmt_rate(s.rate) for s in bare.samples)
            + "; combined 1/(1/no-op + 1/bare) "
            + " / ".join(fmt_rate(f) for f in floors[bare_key])
        )
        name = "write_combined_floor" + ("" if bare_key == "bare-insert" else "_16")
        found.append(f"{name}={statistics.median(floors[bare_key]):.0f}")
    for key, target, against in WRITE_TARGETS:
        m = by_key.get(key)
        if m is None:
            continue
        if against not in floors:
            lines.append(f"  {key}: (run {against} too for its floor)")
            continue
        ratios = [s.rate / f for s, f in zip(m.samples, floors[against], strict=True)]
        ratio = statistics.median(ratios)
        verdict = "met" if ratio >= target else f"NOT met (short by {target - ratio:.2f})"
        lines.append(
            f"  {key:<14} {fmt_rate(m.median):>7}/s (runs "
            + " / ".join(fmt_rate(s.rate) for s in m.samples)
            + f"); / no-op d23 {m.median / noop.median:.2f}; "
            f"target / {'no-op d23' if against == 'd23' else 'combined floor, ' + against} "
            f">= {target:.2f}: {ratio:.2f} {verdict}"
        )
        found.append(f"{key.replace('-', '_')}_ratio={ratio:.2f}")
    return "\n".join([*lines, *found])


def render_targets(by_key: dict[str, Measurement]) -> str:
    """One `name=<ratio>` line per target whose two measurements ran (drain's ratio last)."""
    lines = ["", "Targets (medians of this run; the baseline ran in the same run):"]
    found = []
    if "emit" in by_key and "insert_rows" in by_key:
        lines.append(
            f"  (reference) {by_key['emit'].label} / {by_key['insert_rows'].label}: "
            f"{by_key['emit'].median / by_key['insert_rows'].median:.2f}"
        )
    for tag, numerator, denominator, name, meaning in DIAGNOSTICS:
        if numerator not in by_key or denominator not in by_key:
            continue
        top, bottom = by_key[numerator], by_key[denominator]
        ratio = top.median / bottom.median
        lines.append(
            f"  ({tag}) {top.label} / {bottom.label}: "
            f"{fmt_rate(top.median)} / {fmt_rate(bottom.median)} = {ratio:.2f}{meaning}"
        )
        found.append(f"{name}={ratio:.2f}")
    rss = peak_worker_rss(list(by_key.values()))
    if rss is not None:
        verdict = "met" if rss < 80 else "NOT met"
        lines.append(f"  peak RSS of one drain worker process: {rss:.1f} MB (< 80 MB: {verdict})")
        found.append(f"drain_worker_peak_rss_mb={rss:.1f}")
    for name, numerator, denominator, target in TARGETS:
        if numerator not in by_key or denominator not in by_key:
            continue
        ratio = by_key[numerator].median / by_key[denominator].median
        verdict = "met" if ratio >= target else "NOT met"
        lines.append(
            f"  {by_key[numerator].label} / {by_key[denominator].label}: "
            f"{fmt_rate(by_key[numerator].median)} / {fmt_rate(by_key[denominator].median)} "
            f"= {ratio:.2f} (target >= {target:.2f}: {verdict})"
        )
        found.append(f"{name}={ratio:.2f}")
    return "\n".join([*lines, *found])


# -- main ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    load_before = os.getloadavg()[0]
    run_lock = lock_scratch(config)
    recreate_scratch(config)
    bench = Bench(config, setup_django(config))
    bench.create_raw_table()
    bench.create_write_table()
    durability = bench.durability()
    measurements = [
        Measurement("emit", "eventbus.emit() loop, one transaction", "1", "3", "events/s"),
        Measurement(
            "insert1", "raw SQL: single-row INSERT loop, one transaction", "1", "-", "rows/s"
        ),
        Measurement(
            "insert_rows", "raw SQL: event + deliveries per statement, one tx", "1", "3", "events/s"
        ),
        Measurement(
            "emit_many",
            f"eventbus.emit_many(), chunks of {config.emit_chunk}",
            "1",
            "3",
            "events/s",
        ),
        Measurement(
            "insert_many",
            f"raw SQL: multi-row INSERT of the same rows, chunks of {config.emit_chunk}",
            "1",
            "3",
            "events/s",
        ),
        Measurement("d11", "drain_events, no-op", "1", "1", "deliveries/s"),
        Measurement("d21", "drain_events, no-op", "2", "1", "deliveries/s"),
        Measurement("d13", "drain_events, no-op", "1", "3", "deliveries/s"),
        Measurement("d23", "drain_events, no-op", "2", "3", "deliveries/s"),
        Measurement(
            "o21",
            f"drain_events, no-op, ordered ({bench_consumers.ORDERED_KEYS} keys)",
            "2",
            "1",
            "deliveries/s",
        ),
        Measurement(
            "bare-insert",
            "raw psycopg: the write handlers' INSERT, autocommit",
            "2",
            "3",
            "rows/s",
        ),
        Measurement(
            "plain-write",
            "drain_events (auto threads), one autocommit INSERT",
            "2",
            "3",
            "deliveries/s",
        ),
        Measurement(
            "bare-insert-16",
            f"raw psycopg: the same INSERT on {2 * WRITE_CONCURRENCY} connections",
            str(2 * WRITE_CONCURRENCY),
            "3",
            "rows/s",
        ),
        Measurement(
            "plain-write-8",
            f"drain_events --concurrency {WRITE_CONCURRENCY}, one autocommit INSERT",
            "2",
            "3",
            "deliveries/s",
        ),
        Measurement(
            "plain-write-1",
            "drain_events --concurrency 1, one autocommit INSERT",
            "2",
            "3",
            "deliveries/s",
        ),
        Measurement(
            "atomic-write",
            "drain_events, the INSERT in the ack's transaction",
            "2",
            "3",
            "deliveries/s",
        ),
        Measurement(
            "atomic-write-1",
            "the same, one transaction per delivery (group 1)",
            "2",
            "3",
            "deliveries/s",
        ),
        Measurement(
            "batch-write",
            f"drain_events, batch={bench_consumers.BATCH}, one INSERT per batch",
            "2",
            "3",
            "deliveries/s",
        ),
        Measurement(
            "bus2",
            f"bus SQL alone: claim.sql {config.batch_size} + ack.sql",
            "2",
            "1",
            "deliveries/s",
        ),
        Measurement(
            "raw1", f"raw psycopg: claim {config.batch_size} + batch ack", "1", "-", "rows/s"
        ),
        Measurement(
            "raw2",
            f"raw psycopg: claim {config.batch_size} + batch ack (ceiling)",
            "2",
            "-",
            "rows/s",
        ),
    ]
    measurements = [m for m in measurements if m.key in config.only]
    runners: dict[str, Callable[[], Sample]] = {
        "emit": bench.emit_loop,
        "insert1": bench.insert1,
        "insert_rows": bench.insert_rows,
        "emit_many": bench.emit_many,
        "insert_many": bench.insert_many,
        "d11": lambda: bench.drain(1, bench_consumers.SINGLE_EVENT),
        "d21": lambda: bench.drain(2, bench_consumers.SINGLE_EVENT),
        "d13": lambda: bench.drain(1, bench_consumers.FANOUT_EVENT),
        "d23": lambda: bench.drain(2, bench_consumers.FANOUT_EVENT),
        "o21": lambda: bench.drain(2, bench_consumers.ORDERED_EVENT),
        "bare-insert": lambda: bench.bare_insert(2),
        "plain-write": lambda: bench.write_drain("plain"),
        "bare-insert-16": lambda: bench.bare_insert(2 * WRITE_CONCURRENCY),
        "plain-write-8": lambda: bench.write_drain("plain", concurrency=WRITE_CONCURRENCY),
        "plain-write-1": lambda: bench.write_drain("plain", concurrency=1),
        "atomic-write": lambda: bench.write_drain("atomic"),
        "atomic-write-1": lambda: bench.write_drain("atomic", {"EVENTBUS_ATOMIC_GROUP": "1"}),
        "batch-write": lambda: bench.write_drain("batch"),
        "bus2": lambda: bench.bus_sql(2),
        "raw1": lambda: bench.raw(1),
        "raw2": lambda: bench.raw(2),
    }
    startup: list[float] = []
    try:
        # Runs are interleaved (rep 1 of everything, then rep 2, ...) so that a burst of
        # background load on the machine spreads over all measurements instead of one.
        for rep in range(1, config.repeat + 1):
            startup.append(bench.startup_reference())
            say(f"rep {rep}/{config.repeat}: idle `drain_events --once` took {startup[-1]:.2f}s")
            for m in measurements:
                sample = runners[m.key]()
                m.samples.append(sample)
                steady = f", steady {fmt_rate(sample.steady_rate)}/s" if sample.steady_rate else ""
                say(
                    f"rep {rep}/{config.repeat}: {m.label} [{m.procs}p/{m.consumers}c]: "
                    f"{sample.count:,} in {sample.seconds:.2f}s = {fmt_rate(sample.rate)} "
                    f"{m.unit}{steady}"
                )
    finally:
        bench.admin.close()
        run_lock.close()
    by_key = {m.key: m for m in measurements}
    ceiling = by_key["raw2"].median
    load = (load_before, os.getloadavg()[0])
    print(render(measurements, ceiling, config, startup, load, durability))
    say(f"done in {time.monotonic() - _T0:.0f}s")
    print(render_writes(by_key, durability))
    print(render_targets(by_key))
    return 0


def peak_worker_rss(measurements: list[Measurement]) -> float | None:
    """The largest peak RSS of any drain worker process in the run, MB."""
    peaks = [
        s.peak_rss_mb
        for m in measurements
        if m.key.startswith("d")
        for s in m.samples
        if s.peak_rss_mb is not None
    ]
    return max(peaks) if peaks else None


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except BenchError as exc:
        say(f"FAILED: {exc}")
        raise SystemExit(1) from None
