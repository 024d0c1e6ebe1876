"""Soak benchmark: the sustainable rate of the event bus with one-write consumers, and a peer's.

Run from the repository root with the project's interpreter (docs/soak.md says more):

    .venv/bin/python bench/soak.py [--quick] [--peer graphile|none] [--restart-halfway] ...

The load (issue #49): N producer threads (--producers, default 4) each emit one event per
transaction (`eventbus.emit` inside `transaction.atomic()`) at a paced, shared rate, spread over
10 tenants; the event type has three consumers whose handler does one autocommit
`INSERT ... ON CONFLICT DO UPDATE` through Django's connection (bench/soak_consumers.py); two
`manage.py drain_events` processes with their default flags run them.

Pick-up lag: every handler run writes its row with the event's `created_at` and its own start
time, so lag = started_at - created_at per delivery. Every --window seconds the script prints
p50/p95/p99 of the lag of the deliveries that started in that window, the producers' rate and
the backlog (deliveries not started yet, and the age of the oldest one).

The sustainable rate: the rate steps up from --start-rate (the seed's 10,000 events/min) by
--step; a step holds for --hold seconds (default 180, 30 with --quick) and is sustained when
every window's lag p99 stays under 5 s (counting the deliveries still waiting at the window's
end at their age so far: a stalled system fails too) and the producers kept at least 95% of the
rate. The first step that is not sustained ends the climb (a step ends as soon
as one window fails); --refine halves the gap between the last sustained rate and the failed one
that many times (after letting the backlog drain). If even the first step fails the rate is
halved until one holds. The seed-rate verdict: at 10,000 events/min the lag p99 (over the whole
step) must be under 1 s.

Correctness: when the climb ends the producers stop, the backlog drains, and every delivery must
have run exactly once: rows written vs events emitted x 3 (lost) and the rows' run counts
(duplicates). --restart-halfway SIGTERMs one worker halfway through every step's hold and starts
it again at once (the drain must lose and repeat nothing).

The peer (--peer graphile, the default): graphile-worker (bench/peers/graphile, pinned in its
package-lock.json; `npm ci` there first) runs the same one-write task (tasks/soak_write.js)
as two worker processes (`--jobs` --graphile-jobs each); the producers add one job per consumer,
the three jobs of an "event" in one transaction (`graphile_worker.add_job`), and the same
stepping finds its sustainable rate. The two systems climb in turns (a step of one, then the
other's at the same rate; the producers pause after every step until the backlog has drained),
so that the machine's other load falls on both alike. The ratio of the two rates (target
>= 1.5) is the last line; `--drain-concurrency N` runs drain_events with `--concurrency N`.

Isolation: `DATABASE_URL` only names the server; each system runs in its own scratch database
on it (`<dbname>_soak`, `<dbname>_soak_graphile`), dropped and re-created first. The server's
fsync and synchronous_commit settings are printed (the figures mean something only with fsync on:
`python3 -m dev db` runs such a server). Progress goes to stderr, the results to stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench import drain as base  # noqa: E402  (needs the sys.path line above)
from bench.soak_consumers import (  # noqa: E402
    CREATE_WRITE_TABLE,
    ENTITY_KIND,
    HANDLERS,
    SOAK_CONSUMERS,
    SOAK_EVENT,
    WRITE_TABLE,
)

SEED_RATE = 10_000  # events/min: seed 000 §11's rate
LAG_LIMIT = 5.0  # s: a step is sustained while every window's pick-up lag p99 stays under it
SEED_LAG_LIMIT = 1.0  # s: the lag p99 the seed's rate must keep
P99 = 0.99
KEPT_MIN = 0.95  # the producers must keep this share of a step's rate
MIN_RATE = 500  # events/min: the halving below a failed first step stops here
TARGET_RATIO = 1.5  # our sustainable rate / graphile-worker's (issue #49)
TENANTS = 10
WORKERS = 2
COMMIT_MARGIN = 1.0  # s: a window is read this long after it ends (rows commit just after start)
WARM_UP = 5.0  # s at the start rate before the first step, not judged
STOP_TIMEOUT = 60.0  # s: a SIGTERMed worker must have exited by then
HANDLER_MODULE = "bench.soak_consumers"
GRAPHILE_DIR = REPO_ROOT / "bench" / "peers" / "graphile"
GRAPHILE_BIN = GRAPHILE_DIR / "node_modules" / ".bin" / "graphile-worker"
GRAPHILE_TASK = "soak_write"
LIBPQ_ENV = ("host", "port", "user", "password")  # passed to node-postgres as PG<NAME>

say = base.say


class SoakError(Exception):
    """The benchmark could not run (setup, a worker died, a producer failed)."""


# -- configuration ------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    start_rate: int
    step: int
    max_rate: int
    hold: float
    window: float
    refine: int
    producers: int
    restart_halfway: bool
    peer: str
    only: str | None
    graphile_jobs: int
    drain_concurrency: int | None
    handler: str
    drain_timeout: float
    early_stop: bool
    base_url: str


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(
        description="Sustainable rate of the event bus (one-write consumers) vs graphile-worker.",
        epilog="See the module docstring (bench/soak.py) and docs/soak.md.",
    )
    parser.add_argument("--quick", action="store_true", help="30 s holds, 10 s windows")
    parser.add_argument("--start-rate", type=int, default=SEED_RATE, help="events/min")
    parser.add_argument("--step", type=int, default=10_000, help="events/min added per step")
    parser.add_argument("--max-rate", type=int, default=400_000, help="events/min, highest step")
    parser.add_argument("--hold", type=float, default=None, help="seconds per step (180; 30)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds per lag window")
    parser.add_argument(
        "--refine", type=int, default=None, help="halvings after the first failure (1; 0 quick)"
    )
    parser.add_argument("--producers", type=int, default=4, help="producer threads")
    parser.add_argument(
        "--restart-halfway",
        action="store_true",
        help="SIGTERM one worker halfway through every step's hold and restart it",
    )
    parser.add_argument("--peer", choices=("graphile", "none"), default="graphile")
    parser.add_argument(
        "--only",
        choices=("deskcomm", "graphile"),
        default=None,
        help="run one system alone (no ratio)",
    )
    parser.add_argument(
        "--graphile-jobs", type=int, default=4, help="graphile-worker --jobs per process"
    )
    parser.add_argument(
        "--drain-concurrency",
        type=int,
        default=None,
        help="pass --concurrency N to drain_events (default: its own default)",
    )
    parser.add_argument(
        "--handler",
        choices=HANDLERS,
        default="plain",
        help="how the bus's consumers declare the write (bench/soak_consumers.py; default plain)",
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=600.0, help="seconds to wait for the backlog"
    )
    parser.add_argument(
        "--no-early-stop",
        action="store_true",
        help="hold a failing step to its end instead of ending it at its first failed window",
    )
    args = parser.parse_args(argv)
    hold = args.hold or (30.0 if args.quick else 180.0)
    refine = args.refine if args.refine is not None else (0 if args.quick else 1)
    numbers = (args.start_rate, args.step, args.max_rate, args.producers, args.graphile_jobs)
    if (
        (args.drain_concurrency or 1) < 1
        or min(numbers) < 1
        or hold <= 0
        or args.window <= 0
        or refine < 0
    ):
        parser.error("rates, --step, --producers and --graphile-jobs must be positive")
    if args.window > hold:
        parser.error("--window must not be longer than --hold")
    return Config(
        start_rate=args.start_rate,
        step=args.step,
        max_rate=args.max_rate,
        hold=hold,
        window=args.window,
        refine=refine,
        producers=args.producers,
        restart_halfway=args.restart_halfway,
        peer=args.peer,
        only=args.only,
        graphile_jobs=args.graphile_jobs,
        drain_concurrency=args.drain_concurrency,
        handler=args.handler,
        drain_timeout=args.drain_timeout,
        early_stop=not args.no_early_stop,
        base_url=base.database_url(),
    )


def scratch_database(suffix: str) -> tuple[str, str, str, str]:
    """(name, url, conninfo, admin conninfo) of the scratch database `<dbname>_<suffix>`."""
    scratch = base.scratch_beside(suffix)
    return (
        scratch["scratch_name"],
        scratch["scratch_url"],
        scratch["scratch_conninfo"],
        scratch["admin_conninfo"],
    )


def lock_run(admin_conninfo: str) -> psycopg.Connection[Any]:
    """A session advisory lock for the whole run: a second soak on this server waits its turn
    instead of dropping the first one's databases."""
    conn = psycopg.connect(admin_conninfo, autocommit=True)
    row = conn.execute("SELECT pg_try_advisory_lock(hashtext('bench:soak'))").fetchone()
    if not row or not row[0]:
        conn.close()
        raise SoakError("another bench/soak.py run is using this server; try again later")
    return conn


def recreate(admin_conninfo: str, name: str) -> None:
    with psycopg.connect(admin_conninfo, autocommit=True) as conn:
        ident = psycopg.sql.Identifier(name)
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(ident))


def server_settings(conninfo: str) -> dict[str, str]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        return {
            name: str(conn.execute(f"SHOW {name}").fetchone()[0])  # type: ignore[index]
            for name in ("server_version", "fsync", "synchronous_commit", "full_page_writes")
        }


def graphile_version() -> str:
    """The graphile-worker version bench/peers/graphile/package.json pins."""
    package = json.loads((GRAPHILE_DIR / "package.json").read_text())
    return str(package["dependencies"]["graphile-worker"])


def load_line() -> str:
    """`uptime`'s load averages (and the CPU count)."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


# -- the systems under test ---------------------------------------------------------------

Emit = Callable[[int], None]


class System:
    """One system under test in its own scratch database: its workers, its producers' emit,
    its backlog."""

    name = ""
    label = ""

    def __init__(self, config: Config, suffix: str) -> None:
        self.config = config
        self.db_name, self.url, self.conninfo, self.admin_conninfo = scratch_database(suffix)
        self.workers: list[subprocess.Popen[bytes]] = []
        self.logs = Path(tempfile.mkdtemp(prefix=f"soak-{self.name}-"))
        self.restarts = 0
        self.admin: psycopg.Connection[Any] | None = None
        self.org_ids: list[uuid.UUID] = []

    # set up and tear down ---------------------------------------------------------------

    def prepare(self) -> None:
        """Re-create the scratch database, its schema, the write table and the tenants."""
        raise NotImplementedError

    def worker_command(self) -> tuple[list[str], dict[str, str], Path]:
        """argv, environment and directory of one worker process."""
        raise NotImplementedError

    def emitter(self) -> tuple[Emit, Callable[[], None]]:
        """A producer thread's emit(seq) (one transaction each) and its close()."""
        raise NotImplementedError

    def waiting(self) -> tuple[int, float | None, int]:
        """Deliveries not started yet: how many, the oldest's age in seconds, and how many
        have waited LAG_LIMIT or longer."""
        raise NotImplementedError

    def count_waiting(self, table: str, condition: str) -> tuple[int, float | None, int]:
        [(count, age, late)] = self.rows(
            "SELECT count(*), extract(epoch FROM clock_timestamp() - min(created_at))::float8,"
            " count(*) FILTER (WHERE created_at <= clock_timestamp() - make_interval(secs => %s))"
            f" FROM {table} WHERE {condition}",
            (LAG_LIMIT,),
        )
        return int(count), age, int(late)

    def leftovers(self) -> str:
        """What the system's own tables hold after the drain, for the correctness line."""
        raise NotImplementedError

    def connect_admin(self) -> psycopg.Connection[Any]:
        self.admin = psycopg.connect(self.conninfo, autocommit=True)
        self.admin.execute(CREATE_WRITE_TABLE)
        return self.admin

    def connected(self) -> int:
        """Client sessions on the scratch database other than this process's own."""
        [(count,)] = self.rows(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        return int(count)

    def rows(self, query: str, params: Sequence[object] | dict[str, object] = ()) -> list[Any]:
        assert self.admin is not None
        return self.admin.execute(query, params).fetchall()

    def start_workers(self) -> None:
        self.workers = [self._spawn(i) for i in range(WORKERS)]

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        argv, env, cwd = self.worker_command()
        log = (self.logs / f"worker-{index}-{self.restarts}.log").open("wb")
        return subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def check_workers(self) -> None:
        for index, proc in enumerate(self.workers):
            if proc.poll() is not None:
                raise SoakError(
                    f"{self.label} worker {index} exited {proc.returncode}; logs in {self.logs}"
                )

    def restart_worker(self, index: int) -> float:
        """SIGTERM one worker, wait for it to exit, start it again; seconds it was down."""
        proc = self.workers[index]
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            message = f"{self.label} worker {index} ignored SIGTERM for {STOP_TIMEOUT}s"
            raise SoakError(message) from None
        self.restarts += 1
        self.workers[index] = self._spawn(index)
        return time.monotonic() - started

    def stop_workers(self) -> None:
        for proc in self.workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.workers:
            try:
                proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.admin is not None:
            self.admin.close()


class Deskcomm(System):
    """The event bus: `eventbus.emit` producers, two `manage.py drain_events` workers."""

    name = "deskcomm"
    label = "deskcomm drain_events"

    def __init__(self, config: Config) -> None:
        super().__init__(config, "soak")
        self.env = base.scratch_env(self.url, HANDLER_MODULE)
        self.env["BENCH_SOAK_HANDLER"] = config.handler

    def prepare(self) -> None:
        say(f"{self.name}: re-creating {self.db_name} and migrating it")
        base.recreate_database(self.admin_conninfo, self.db_name, self.env)
        os.environ.update(self.env)
        import django

        django.setup()
        from django.db import connection

        from core import rls
        from core.models import Organization

        rls.bypass_process()  # a platform process: it emits for the bench's tenants directly
        self.org_ids = [
            Organization.objects.create(name=f"Soak {i}", slug=f"soak-{i}").pk
            for i in range(TENANTS)
        ]
        connection.close()  # connected() counts the workers' sessions only
        self.connect_admin()

    def worker_command(self) -> tuple[list[str], dict[str, str], Path]:
        argv = [sys.executable, str(REPO_ROOT / "manage.py"), "drain_events"]
        if self.config.drain_concurrency:
            argv += ["--concurrency", str(self.config.drain_concurrency)]
        return argv, self.env, REPO_ROOT

    def emitter(self) -> tuple[Emit, Callable[[], None]]:
        from django.db import connection, transaction

        import eventbus

        orgs = self.org_ids

        def emit(seq: int) -> None:
            with transaction.atomic():
                eventbus.emit(
                    SOAK_EVENT,
                    organization=orgs[seq % TENANTS],
                    entity_kind=ENTITY_KIND,
                    entity_id=uuid.uuid4(),
                    payload={"seq": seq},
                )

        return emit, connection.close

    def waiting(self) -> tuple[int, float | None, int]:
        return self.count_waiting("eventbus_delivery", "status = 'pending'")

    def leftovers(self) -> str:
        deliveries = self.rows(
            "SELECT status, count(*), max(attempts) FROM eventbus_delivery GROUP BY status"
            " ORDER BY status"
        )
        return "deliveries (status, count, max attempts): " + ", ".join(
            f"{s} {n:,} {a}" for s, n, a in deliveries
        )

    def emitted_events(self) -> int:
        return int(self.rows("SELECT count(*) FROM event_log")[0][0])


# One "event" of the peer: its three jobs (one per consumer) in one transaction, one statement.
GRAPHILE_ADD = f"""
SELECT graphile_worker.add_job(
         '{GRAPHILE_TASK}',
         json_build_object('event_id', %(event_id)s::text, 'consumer', c,
                           'organization_id', %(org)s::text))
  FROM unnest(%(consumers)s::text[]) AS c
"""


class Graphile(System):
    """graphile-worker: `graphile_worker.add_job` producers, two `graphile-worker` processes."""

    name = "graphile"
    label = "graphile-worker"

    def __init__(self, config: Config) -> None:
        super().__init__(config, "soak_graphile")
        params = psycopg.conninfo.conninfo_to_dict(self.conninfo)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        self.env.update({f"PG{k.upper()}": str(v) for k, v in params.items() if k in LIBPQ_ENV})
        self.env["PGDATABASE"] = self.db_name
        self.env.pop("DATABASE_URL", None)  # the PG* variables name the scratch database

    def prepare(self) -> None:
        if not GRAPHILE_BIN.exists():
            raise SoakError(f"graphile-worker is not installed: run `npm ci` in {GRAPHILE_DIR}")
        say(f"{self.name}: re-creating {self.db_name} and installing graphile-worker's schema")
        recreate(self.admin_conninfo, self.db_name)
        result = subprocess.run(
            [str(GRAPHILE_BIN), "--schema-only"],
            cwd=GRAPHILE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SoakError(
                f"graphile-worker --schema-only failed:\n{result.stdout}{result.stderr}"
            )
        self.org_ids = [uuid.uuid4() for _ in range(TENANTS)]
        self.connect_admin()

    def worker_command(self) -> tuple[list[str], dict[str, str], Path]:
        argv = [str(GRAPHILE_BIN), "--jobs", str(self.config.graphile_jobs)]
        return argv, self.env, GRAPHILE_DIR

    def emitter(self) -> tuple[Emit, Callable[[], None]]:
        conn = psycopg.connect(self.conninfo, autocommit=True)
        orgs, consumers = self.org_ids, list(SOAK_CONSUMERS)

        def emit(seq: int) -> None:
            params = {"event_id": uuid.uuid4(), "org": orgs[seq % TENANTS], "consumers": consumers}
            conn.execute(GRAPHILE_ADD, params)

        return emit, conn.close

    def waiting(self) -> tuple[int, float | None, int]:
        return self.count_waiting("graphile_worker.jobs", "locked_at IS NULL")

    def leftovers(self) -> str:
        jobs = self.rows(
            "SELECT count(*), coalesce(max(attempts), 0), count(*) FILTER (WHERE last_error"
            " IS NOT NULL) FROM graphile_worker.jobs"
        )
        count, attempts, failed = jobs[0]
        return f"jobs left {count:,} (max attempts {attempts}, with an error {failed:,})"


# -- producers ----------------------------------------------------------------------------


class Producers:
    """N threads emitting one event per transaction on a shared schedule: event k of the current
    rate is due at start + k / rate. A thread behind schedule emits at once (it catches up as
    fast as it can; the step's kept share shows it)."""

    def __init__(self, system: System, threads: int) -> None:
        self.system = system
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.per_second = 0.0
        self.origin = time.monotonic()
        self.next = 0
        self.seq = 0
        self.emitted = 0
        self.errors: list[str] = []
        self.threads = [
            threading.Thread(target=self._run, name=f"producer-{i}", daemon=True)
            for i in range(threads)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def set_rate(self, per_minute: float) -> None:
        with self.lock:
            self.per_second = per_minute / 60
            self.origin = time.monotonic()
            self.next = 0

    def count(self) -> int:
        with self.lock:
            return self.emitted

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()
        if self.errors:
            raise SoakError(f"a producer failed: {self.errors[0]}")

    def _take(self) -> tuple[int, float] | None:
        """The next sequence number and its due time (None while paused)."""
        with self.lock:
            if not self.per_second:
                return None
            due = self.origin + self.next / self.per_second
            self.next += 1
            self.seq += 1
            return self.seq, due

    def _run(self) -> None:
        emit, close = self.system.emitter()
        try:
            while not self.stop.is_set():
                taken = self._take()
                if taken is None:
                    self.stop.wait(0.05)  # paused: look again shortly
                    continue
                seq, due = taken
                delay = due - time.monotonic()
                if delay > 0 and self.stop.wait(delay):
                    return
                emit(seq)
                with self.lock:
                    self.emitted += 1
        except Exception as exc:  # a failed emit ends the run (reported by close())
            self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop.set()
        finally:
            close()


# -- measurement --------------------------------------------------------------------------

LAG_SQL = f"""
SELECT count(*),
       percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY lag),
       max(lag)
  FROM (SELECT extract(epoch FROM started_at - created_at)::float8 AS lag
          FROM {WRITE_TABLE} WHERE started_at >= %s AND started_at < %s) AS runs
"""


@dataclass
class Lag:
    count: int
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None

    def fmt(self) -> str:
        if not self.count or self.p99 is None:
            return "no deliveries started"
        return (
            f"lag p50 {self.p50:.2f}s p95 {self.p95:.2f}s p99 {self.p99:.2f}s "
            f"max {self.max:.2f}s ({self.count:,} started)"
        )


def lag_between(system: System, start: dt.datetime, end: dt.datetime) -> Lag:
    [(count, quantiles, longest)] = system.rows(LAG_SQL, (start, end))
    p50, p95, p99 = quantiles or (None, None, None)
    return Lag(int(count), p50, p95, p99, longest)


@dataclass
class Window:
    lag: Lag
    emitted_per_min: float
    waiting: int
    oldest: float | None
    late: int  # waiting at the window's end for LAG_LIMIT or longer

    @property
    def failure(self) -> str | None:
        """The window's lag p99 reached LAG_LIMIT: among the runs that started in it, or
        counting the deliveries still waiting, whose lag is at least their age (over 1% of the
        window's deliveries have waited LAG_LIMIT already: its p99 cannot be under it)."""
        if self.lag.p99 is not None and self.lag.p99 >= LAG_LIMIT:
            return f"lag p99 {self.lag.p99:.1f}s"
        if self.late > (1 - P99) * (self.lag.count + self.late):
            return f"{self.late:,} waiting >= {LAG_LIMIT:.0f}s (oldest {self.oldest:.1f}s)"
        return None


@dataclass
class Step:
    rate: int  # events/min asked
    seconds: float = 0.0
    emitted: int = 0
    windows: list[Window] = field(default_factory=list)
    lag: Lag | None = None  # over the whole step
    restart_down: float | None = None  # s from the SIGTERM to the replacement's spawn
    drained_s: float | None = None  # s the backlog took to drain after the step
    failure: str | None = None

    @property
    def kept(self) -> float:
        return self.emitted / (self.rate / 60 * self.seconds) if self.seconds else 0.0

    @property
    def sustained(self) -> bool:
        return self.failure is None

    def judge(self) -> None:
        """Fail the step on its first failing window, or when the producers fell behind."""
        failed = next((w.failure for w in self.windows if w.failure), None)
        if failed:
            self.failure = failed
        elif self.kept < KEPT_MIN:
            self.failure = f"producers kept {self.kept:.0%}"


@dataclass
class Outcome:
    system: System
    steps: list[Step]
    sustainable: int | None
    emitted: int
    drained_s: float | None
    written: int
    runs: int
    leftovers: str
    started: str
    finished: str

    @property
    def expected(self) -> int:
        return self.emitted * len(SOAK_CONSUMERS)

    @property
    def lost(self) -> int:
        return self.expected - self.written

    @property
    def duplicates(self) -> int:
        return self.runs - self.written

    def seed_step(self) -> Step | None:
        return next((s for s in self.steps if s.rate == SEED_RATE and s.lag), None)


class Soak:
    """The stepping for one system: producers at a rate, windows read from the write table."""

    def __init__(self, system: System, config: Config) -> None:
        self.system = system
        self.config = config
        self.producers = Producers(system, config.producers)
        self.climb = Climb(config)
        self.steps: list[Step] = []
        self.started = ""

    def hold(self, rate: int) -> Step:
        config, system = self.config, self.system
        step = Step(rate)
        say(f"{system.name}: step {rate:,} events/min ({rate / 60:,.0f}/s) for {config.hold:.0f}s")
        first = self.producers.count()
        self.producers.set_rate(rate)
        started, wall_start = time.monotonic(), now()
        restart_at = started + config.hold / 2 if config.restart_halfway else None
        window_start, emitted = wall_start, first
        tick = started
        while tick < started + config.hold - 1e-6:
            tick = min(started + config.hold, tick + config.window)  # windows back to back
            while time.monotonic() < tick:
                if restart_at is not None and time.monotonic() >= restart_at:
                    restart_at = None
                    step.restart_down = system.restart_worker(1)
                    down = step.restart_down
                    say(f"{system.name}: worker 1 SIGTERMed, exited, started again in {down:.1f}s")
                system.check_workers()
                time.sleep(min(0.2, max(0.0, tick - time.monotonic())))  # pacing, not waiting
            window_end, count = now(), self.producers.count()
            seconds = (window_end - window_start).total_seconds()
            time.sleep(COMMIT_MARGIN)  # the rows of runs started before window_end are in
            window = Window(
                lag_between(system, window_start, window_end),
                (count - emitted) / seconds * 60,
                *system.waiting(),
            )
            step.windows.append(window)
            oldest = f"{window.oldest:.1f}s" if window.oldest is not None else "-"
            say(
                f"{system.name}:   {(window_end - wall_start).total_seconds():5.0f}s "
                f"emitted {window.emitted_per_min:,.0f}/min, {window.lag.fmt()}, "
                f"waiting {window.waiting:,} (oldest {oldest})"
                + (f"  FAIL: {window.failure}" if window.failure else "")
            )
            window_start, emitted = window_end, count
            if window.failure and config.early_stop:
                break
        step.seconds = (window_start - wall_start).total_seconds()
        step.emitted = emitted - first
        step.lag = lag_between(system, wall_start, window_start)
        step.judge()
        verdict = "sustained" if step.sustained else f"NOT sustained ({step.failure})"
        say(
            f"{system.name}: step {rate:,}/min: {verdict}; producers kept {step.kept:.0%}, "
            f"{step.lag.fmt()}"
        )
        return step

    def pause_and_drain(self) -> float | None:
        """Stop producing and wait for the backlog (and its last rows); seconds, or None."""
        self.producers.set_rate(0)
        started = time.monotonic()
        deadline = started + self.config.drain_timeout
        while time.monotonic() < deadline:
            self.system.check_workers()
            expected = self.producers.count() * len(SOAK_CONSUMERS)
            written = int(self.system.rows(f"SELECT count(*) FROM {WRITE_TABLE}")[0][0])
            if written >= expected and self.system.waiting()[0] == 0:
                return time.monotonic() - started
            time.sleep(0.5)  # polling the tables with a deadline
        return None

    def warm_up(self) -> None:
        """Wait until every worker process has connected, then run WARM_UP seconds at the
        start rate (not judged) and let that drain: the first step starts on warm workers."""
        system = self.system
        deadline = time.monotonic() + STOP_TIMEOUT
        while system.connected() < WORKERS:
            system.check_workers()
            if time.monotonic() > deadline:
                raise SoakError(f"{system.label}: workers not connected after {STOP_TIMEOUT}s")
            time.sleep(0.2)  # polling pg_stat_activity with a deadline
        say(f"{system.name}: workers connected; warming up for {WARM_UP:.0f}s")
        self.producers.start()
        self.producers.set_rate(self.config.start_rate)
        time.sleep(WARM_UP)  # pacing: the producers run meanwhile
        if self.pause_and_drain() is None:
            raise SoakError(
                f"{self.system.label}: backlog not drained in {self.config.drain_timeout}s"
            )

    def start(self) -> None:
        self.started = time.strftime("%H:%M:%S")
        self.system.prepare()
        self.system.start_workers()
        self.warm_up()

    def step(self, rate: int) -> None:
        """Hold `rate`, judge it, then stop producing and let the backlog drain."""
        step = self.hold(rate)
        self.steps.append(step)
        say(f"{self.system.name}: letting the backlog drain")
        step.drained_s = self.pause_and_drain()
        if step.drained_s is None:
            say(f"{self.system.name}: backlog not drained in {self.config.drain_timeout:.0f}s")
            self.climb.record(rate, sustained=False)
            self.climb.next = None  # a system that cannot catch up climbs no further
        else:
            self.climb.record(rate, step.sustained)

    def finish(self) -> Outcome:
        """Stop the producers and check that every delivery ran exactly once."""
        system = self.system
        say(f"{system.name}: producers stop; waiting for the backlog to drain")
        drained = self.pause_and_drain()
        self.producers.close()
        [(written, runs)] = system.rows(
            f"SELECT count(*), coalesce(sum(runs), 0) FROM {WRITE_TABLE}"
        )
        leftovers = system.leftovers()
        if isinstance(system, Deskcomm) and system.emitted_events() != self.producers.count():
            leftovers += (
                f"; event_log has {system.emitted_events():,} events, the producers "
                f"committed {self.producers.count():,}"
            )
        return Outcome(
            system,
            self.steps,
            self.climb.best,
            self.producers.count(),
            drained,
            int(written),
            int(runs),
            leftovers,
            self.started,
            time.strftime("%H:%M:%S"),
        )

    def stop(self) -> None:
        self.producers.stop.set()
        self.system.stop_workers()


class Climb:
    """The rates one system tries: up by --step from --start-rate until a step fails, halving
    while not even one has held, then --refine midpoints between the best and the failed."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.next: int | None = config.start_rate
        self.best: int | None = None
        self.failed: int | None = None
        self.refines = config.refine

    def record(self, rate: int, sustained: bool) -> None:
        if sustained:
            self.best = rate
        else:
            self.failed = rate
        self.next = self._choose(rate)

    def _choose(self, rate: int) -> int | None:
        if self.failed is None:  # climbing
            up = rate + self.config.step
            return up if up <= self.config.max_rate else None
        if self.best is None:  # not even the first step held
            down = self.failed // 2
            return down if down >= MIN_RATE else None
        if self.refines and self.failed - self.best >= 2 * MIN_RATE:
            self.refines -= 1
            return (self.best + self.failed) // 2
        return None


def soak_all(soaks: list[Soak]) -> list[Outcome]:
    """Climb the systems in turns (one step each at the same rate, each on an empty backlog), so
    that the machine's other load falls on both alike; then check each."""
    try:
        for soak in soaks:
            soak.start()
        while turn := [soak for soak in soaks if soak.climb.next is not None]:
            for soak in turn:
                assert soak.climb.next is not None
                soak.step(soak.climb.next)
        outcomes = [soak.finish() for soak in soaks]
        say(f"after: {load_line()}")
        return outcomes
    finally:
        for soak in soaks:
            soak.stop()


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# -- report -------------------------------------------------------------------------------


def render(outcome: Outcome, config: Config) -> list[str]:
    system = outcome.system
    lines = [
        "",
        f"{system.label} ({outcome.started}-{outcome.finished}, database {system.db_name}):",
        f"  {'events/min':>10} {'kept':>5} {'p50':>6} {'p95':>6} {'p99':>6} {'worst p99':>9} "
        f"{'max wait':>8} {'drained':>7}  verdict",
    ]
    for step in outcome.steps:
        lag = step.lag or Lag(0, None, None, None, None)
        worst = max((w.lag.p99 or 0 for w in step.windows), default=0)
        oldest = max((w.oldest or 0 for w in step.windows), default=0)
        lines.append(
            f"  {step.rate:>10,} {step.kept:>5.0%} {fmt_s(lag.p50):>6} {fmt_s(lag.p95):>6} "
            f"{fmt_s(lag.p99):>6} {worst:>8.2f}s {oldest:>7.1f}s {fmt_s(step.drained_s):>7}  "
            + ("sustained" if step.sustained else f"NOT sustained: {step.failure}")
            + (
                f" (worker restarted: {step.restart_down:.1f}s to exit)"
                if step.restart_down
                else ""
            )
        )
    best = outcome.sustainable
    lines.append(
        f"  sustainable rate: {best:,} events/min ({best * 3 / 60:,.0f} deliveries/s)"
        if best
        else "  sustainable rate: none of the steps held"
    )
    drained = fmt_s(outcome.drained_s) if outcome.drained_s is not None else "NOT drained"
    ok = outcome.lost == 0 and outcome.duplicates == 0
    lines += [
        f"  correctness: {outcome.emitted:,} events emitted x {len(SOAK_CONSUMERS)} = "
        f"{outcome.expected:,} deliveries; {outcome.written:,} ran, lost {outcome.lost:,}, "
        f"ran twice or more {outcome.duplicates:,} -> {'OK' if ok else 'FAILED'} "
        f"(backlog drained in {drained}; {outcome.leftovers})",
    ]
    if system.restarts:
        lines.append(f"  workers SIGTERMed and restarted: {system.restarts}")
    return lines


def fmt_s(value: float | None) -> str:
    return f"{value:.2f}s" if value is not None else "-"


def render_summary(outcomes: list[Outcome]) -> list[str]:
    """The seed-rate verdict, each system's sustainable rate, the ratio, `name=value` lines."""
    lines, found = ["", "Summary:"], []
    for outcome in outcomes:
        name, seed = outcome.system.name, outcome.seed_step()
        if seed is None or seed.lag is None or seed.lag.p99 is None:
            lines.append(f"  {name}: seed rate ({SEED_RATE:,} events/min) not measured")
        else:
            verdict = "met" if seed.lag.p99 < SEED_LAG_LIMIT and seed.sustained else "NOT met"
            if seed.lag.p99 < SEED_LAG_LIMIT and not seed.sustained:
                verdict += f": the step was not sustained, {seed.failure}"
            target = f" (< {SEED_LAG_LIMIT:.0f} s: {verdict})" if name == "deskcomm" else ""
            lines.append(
                f"  {name}: lag p99 at the seed rate ({SEED_RATE:,} events/min) "
                f"{seed.lag.p99:.2f}s{target}"
            )
            found.append(f"{name}_seed_rate_lag_p99_s={seed.lag.p99:.2f}")
        found.append(f"{name}_sustainable_events_per_min={outcome.sustainable or 0}")
        found += [f"{name}_lost={outcome.lost}", f"{name}_duplicates={outcome.duplicates}"]
    by_name = {o.system.name: o.sustainable for o in outcomes}
    if len(by_name) == 2:
        ours, peer = by_name["deskcomm"], by_name["graphile"]
        if ours and peer:
            ratio = ours / peer
            verdict = "met" if ratio >= TARGET_RATIO else "NOT met"
            lines.append(
                f"  sustainable rate, deskcomm / graphile-worker: {ours:,} / {peer:,} "
                f"events/min = {ratio:.2f} (target >= {TARGET_RATIO}: {verdict})"
            )
            found.append(f"soak_ratio_to_graphile={ratio:.2f}")
        else:
            lines.append("  sustainable rate ratio: not defined (a system held no step)")
    return [*lines, *found]


def stop_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


# -- main ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    signal.signal(signal.SIGTERM, stop_on_signal)  # the workers are stopped on the way out
    signal.signal(signal.SIGHUP, stop_on_signal)
    systems: list[System] = [Deskcomm(config)]
    if config.peer == "graphile":
        systems.append(Graphile(config))
    systems = [s for s in systems if config.only in {None, s.name}]
    lock = lock_run(systems[0].admin_conninfo)
    settings = server_settings(systems[0].admin_conninfo)
    header = [
        "Soak: one event per transaction from "
        f"{config.producers} producer threads, {len(SOAK_CONSUMERS)} one-write consumers, "
        f"{WORKERS} worker processes, {TENANTS} tenants; steps from {config.start_rate:,} "
        f"events/min by {config.step:,}, {config.hold:.0f}s holds, {config.window:.0f}s windows"
        + (
            ", one worker SIGTERMed and restarted halfway through each step"
            if config.restart_halfway
            else ""
        ),
        f"sustained: every window's pick-up lag p99 < {LAG_LIMIT:.0f}s (the waiting count at "
        "their age),"
        f" producers kept >= {KEPT_MIN:.0%} of the rate",
        f"PostgreSQL {settings['server_version']}: fsync={settings['fsync']}, "
        f"synchronous_commit={settings['synchronous_commit']}, "
        f"full_page_writes={settings['full_page_writes']}"
        + ("" if settings["fsync"] == "on" else "  (fsync OFF: commits cost less than for real)"),
        f"drain_events, {config.handler} consumers: "
        + (
            f"--concurrency {config.drain_concurrency}"
            if config.drain_concurrency
            else "default flags"
        )
        + (
            f"; graphile-worker {graphile_version()}: --jobs {config.graphile_jobs} per process"
            if config.peer == "graphile"
            else "; no peer"
        ),
        f"before: {load_line()}",
    ]
    for line in header:
        say(line)
    try:
        outcomes = soak_all([Soak(system, config) for system in systems])
    finally:
        lock.close()
    lines = list(header)
    for outcome in outcomes:
        lines += render(outcome, config)
    lines += ["", f"after: {load_line()}"]
    lines += render_summary(outcomes)
    print("\n".join(lines))
    if any(o.lost or o.duplicates for o in outcomes):
        say(
            "FAILED: a delivery was lost or ran twice; worker logs: "
            + ", ".join(str(s.logs) for s in systems)
        )
        return 1
    for system in systems:
        shutil.rmtree(system.logs, ignore_errors=True)
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except (SoakError, base.BenchError) as exc:
        say(f"FAILED: {exc}")
        raise SystemExit(1) from None
