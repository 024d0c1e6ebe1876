"""Load test of the integration API: POST /api/v1/events from concurrent clients against gunicorn.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/api_load.py [--requests N] [--concurrency 32] [--quick]

What happens (everything on this machine, loopback only, bounded in requests and time):

1. A scratch database `<DATABASE_URL name>_apibench` is dropped, created and migrated (the base
   database is never touched); an organization and an API key with every scope are created.
2. gunicorn starts with the project's `gunicorn.conf.py` (threaded workers sized for 2 cores;
   `WEB_CONCURRENCY`/`GUNICORN_THREADS` or --workers/--threads override) on a free port of
   127.0.0.1, with the bench consumers loaded (each event fans out to one delivery) and the rate
   limits raised so they never refuse (the API key's and the emit door's: both still checked,
   one upsert each per request; the bench event type is open to the API door).
3. For each scenario, `--concurrency` clients (threads spread over `--client-procs` processes,
   each with a keep-alive connection) send `--requests` requests in total after a warm-up, and
   every latency (send -> full response read) is recorded:
   - floor: `GET /api/ping` (liveness: middleware, URL resolution, a JSON body; no
     authentication, no database): what any request costs on this server;
   - read: `GET /api/v1/events?limit=10` (key lookup, throttle, a page query);
   - emit: `POST /api/v1/events` (key lookup, throttle, validation, one INSERT of the event and
     its delivery, JSON response);
   - emit+idem: the same with a fresh `Idempotency-Key` per request (+ the key's row).
4. It prints requests/s, p50/p95/p99 latency and the throughput ratio to the floor measured in
   the same run, checks every status code and that every emit wrote its event, and stops gunicorn.
5. It also prints the CPU time each request cost, read from /proc around each timed run: in
   gunicorn (the master and its workers) and in the PostgreSQL backends serving the scratch
   database (when the server runs on this machine; PostgreSQL's background writers are not
   counted): where each request's CPU goes. Contention inflates it too (gunicorn's threads and
   the clients share the cores), so compare trees by alternated runs, never by one.

The clients share the 2 cores with gunicorn and PostgreSQL, so figures are what this machine
does end to end, not what the server alone could do.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `deskcomm`... importable

from bench.scratch import ScratchDatabase, production_settings  # noqa: E402  (needs the sys.path line above)

BENCH_EVENT = "bench.single"  # bench/bench_consumers.py: one consumer, so one delivery each
START_TIMEOUT = 60.0
RUN_TIMEOUT = 600.0
_T0 = time.monotonic()


def say(message: str) -> None:
    sys.stderr.write(f"[api-load {time.monotonic() - _T0:6.1f}s] {message}\n")
    sys.stderr.flush()


@dataclass(frozen=True)
class Scenario:
    name: str
    method: str
    path: str
    expect: int
    emits: bool = False
    idempotent: bool = False


SCENARIOS = (
    Scenario("floor", "GET", "/api/ping", 200),
    Scenario("read", "GET", "/api/v1/events?limit=10", 200),
    Scenario("emit", "POST", "/api/v1/events", 201, emits=True),
    Scenario("emit+idem", "POST", "/api/v1/events", 201, emits=True, idempotent=True),
)


# -- the client side (runs in --client-procs processes) ------------------------------------


def request_parts(scenario: Scenario, token: str, seq: str) -> tuple[bytes | None, dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}", "Host": "localhost"}
    if not scenario.emits:
        return None, headers
    body = {"event_type": BENCH_EVENT, "entity_kind": "bench_item", "payload": {"seq": seq}}
    headers["Content-Type"] = "application/json"
    if scenario.idempotent:
        headers["Idempotency-Key"] = seq
    return json.dumps(body).encode(), headers


def client_thread(
    port: int, scenario: Scenario, token: str, count: int, out: list[tuple[int, float]]
) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(count):
        body, headers = request_parts(scenario, token, uuid.uuid4().hex)
        started = time.perf_counter()
        try:
            conn.request(scenario.method, scenario.path, body=body, headers=headers)
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            conn.close()  # reconnect on the next request; counted as a failure
            out.append((0, time.perf_counter() - started))
            continue
        out.append((response.status, time.perf_counter() - started))
        if response.getheader("Connection", "").lower() == "close":
            conn.close()
    conn.close()


def client_process(
    port: int, scenario: Scenario, token: str, threads: int, per_thread: int, go: Any, queue: Any
) -> None:
    results: list[list[tuple[int, float]]] = [[] for _ in range(threads)]
    workers = [
        threading.Thread(target=client_thread, args=(port, scenario, token, per_thread, out))
        for out in results
    ]
    go.wait()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    queue.put([item for out in results for item in out])


@dataclass
class Result:
    scenario: Scenario
    seconds: float
    statuses: Counter[int]
    latencies: list[float]
    cpu: dict[str, float] = field(default_factory=dict)  # "web" / "db" -> CPU seconds in the run

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def percentile_ms(self, p: int) -> float:
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[p - 1] * 1000


def drive(
    port: int,
    scenario: Scenario,
    token: str,
    total: int,
    concurrency: int,
    procs: int,
    meter: CpuMeter,
) -> Result:
    """`total` requests from `concurrency` clients in `procs` processes; the clock starts at go
    and `meter` reads the server's CPU time then and at the end."""
    ctx = mp.get_context("spawn")
    go, queue = ctx.Event(), ctx.Queue()
    threads = max(1, concurrency // procs)
    per_thread = max(1, total // (threads * procs))
    children = [
        ctx.Process(
            target=client_process, args=(port, scenario, token, threads, per_thread, go, queue)
        )
        for _ in range(procs)
    ]
    for child in children:
        child.start()
    time.sleep(1.0)  # let the spawned interpreters import before the clock starts
    before = meter.read()
    started = time.perf_counter()
    go.set()
    samples = [item for _ in children for item in queue.get(timeout=RUN_TIMEOUT)]
    seconds = time.perf_counter() - started
    cpu = meter.since(before)
    for child in children:
        child.join(RUN_TIMEOUT)
    statuses, latencies = Counter(s for s, _ in samples), [t for _, t in samples]
    return Result(scenario, seconds, statuses, latencies, cpu)


class CpuMeter:
    """CPU time (user + system, from /proc/<pid>/stat) of gunicorn's processes and of the
    PostgreSQL backends connected to the scratch database, read before and after a run."""

    TICK = os.sysconf("SC_CLK_TCK")

    def __init__(self, server_pid: int, scratch: ScratchDatabase) -> None:
        self.server_pid = server_pid
        self.scratch = scratch

    def read(self) -> dict[str, dict[int, float]]:
        web = self._times(self._tree(self.server_pid))
        return {"web": web, "db": self._times(self._backends())}

    def since(self, before: dict[str, dict[int, float]]) -> dict[str, float]:
        """CPU seconds per group since `before` (a process new since then counts from 0)."""
        after = self.read()
        return {
            group: sum(t - before[group].get(pid, 0.0) for pid, t in times.items())
            for group, times in after.items()
        }

    def _tree(self, pid: int) -> list[int]:
        pids = [pid]
        for child in _children(pid):
            pids += self._tree(child)
        return pids

    def _backends(self) -> list[int]:
        """The pids serving the scratch database, when they are processes of this machine."""
        import psycopg

        with psycopg.connect(self.scratch.conninfo()) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        return [pid for (pid,) in rows if _is_postgres(pid)]

    def _times(self, pids: list[int]) -> dict[int, float]:
        times = {}
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue  # gone, or not on this machine
            times[pid] = (int(fields[11]) + int(fields[12])) / self.TICK  # utime, stime
        return times


def _children(pid: int) -> list[int]:
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return []
    found: list[int] = []
    for task in tasks:
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def _is_postgres(pid: int) -> bool:
    try:
        return b"postgres" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


# -- the server side -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def create_key(env: dict[str, str]) -> str:
    """An organization and a key with every scope, in the scratch database (a subprocess)."""
    code = (
        "import django; django.setup()\n"
        "from core import scopes, services\n"
        "from core.models import Organization\n"
        "org = Organization.objects.create(name='Bench', slug='bench')\n"
        "_, key = services.api_key_create(organization=org, name='load',"
        " scopes_granted=list(scopes.declared()), actor='bench')\n"
        "print(key)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DB_RLS_BYPASS": "true"},  # a platform step (core.rls), not the server
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"creating the API key failed:\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def start_gunicorn(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "gunicorn", "-c", str(REPO_ROOT / "gunicorn.conf.py")]
    command += ["--bind", f"127.0.0.1:{port}", "deskcomm.wsgi"]
    server = subprocess.Popen(command, env=env, cwd=REPO_ROOT)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {server.returncode}")
        if _pings(port):  # the master binds the port before a worker has booted
            return server
        time.sleep(0.1)  # polling for a booted worker, with a deadline
    server.kill()
    raise RuntimeError("gunicorn did not answer GET /api/ping in time")


def _pings(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/api/ping")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def stop(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def count_events(scratch: ScratchDatabase) -> tuple[int, int]:
    import psycopg

    # Every tenant's rows: the check bypasses row-level security (core.rls).
    with psycopg.connect(scratch.conninfo(), options="-c app.rls_bypass=on") as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM event_log), (SELECT count(*) FROM eventbus_delivery)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


# -- the run ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, help="per scenario (default 8000; 1000 --quick)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed requests first")
    parser.add_argument("--concurrency", type=int, default=32, help="concurrent clients")
    parser.add_argument("--client-procs", type=int, default=2, help="processes for the clients")
    parser.add_argument("--workers", type=int, help="gunicorn workers (WEB_CONCURRENCY)")
    parser.add_argument("--threads", type=int, help="threads per worker (GUNICORN_THREADS)")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args(argv)
    args.requests = args.requests or (1000 if args.quick else 8000)
    args.warmup = args.warmup if args.warmup is not None else min(1000, args.requests // 4)
    if min(args.requests, args.concurrency, args.client_procs) < 1:
        parser.error("--requests, --concurrency and --client-procs must be positive")
    return args


def server_env(scratch: ScratchDatabase, args: argparse.Namespace) -> dict[str, str]:
    extra = {
        "EVENTBUS_HANDLER_MODULES": "bench.bench_consumers",
        "API_THROTTLE_RATE": "1000000000/minute",  # checked, never refusing
        "EVENTBUS_DOOR_EMIT_RATE": "1000000000/minute",  # the door's own limit: the same
        "LOG_LEVEL": "WARNING",
        "GUNICORN_LOG_LEVEL": "warning",
        "DB_CONN_MAX_AGE": "600",
        "ALLOWED_HOSTS": "localhost,127.0.0.1",
        **production_settings(),  # DEBUG stays off: the deploy checks want real keys
    }
    if args.workers:
        extra["WEB_CONCURRENCY"] = str(args.workers)
    if args.threads:
        extra["GUNICORN_THREADS"] = str(args.threads)
    return scratch.env(**extra)


def report(results: list[Result], args: argparse.Namespace, env: dict[str, str]) -> None:
    floor = results[0].rate
    workers, threads = env.get("WEB_CONCURRENCY", "3"), env.get("GUNICORN_THREADS", "4")
    print(
        f"\nAPI load: {args.concurrency} concurrent clients ({args.client_procs} processes), "
        f"gunicorn {workers} workers x {threads} threads (gthread), 127.0.0.1"
    )
    print(f"{'scenario':<11} {'requests':>8} {'req/s':>8} {'p50 ms':>7} {'p95 ms':>7} "
          f"{'p99 ms':>7} {'vs floor':>8} {'web us':>7} {'db us':>6}  statuses")  # fmt: skip
    for r in results:
        p50, p95, p99 = (r.percentile_ms(p) for p in (50, 95, 99))
        web, db = (_per_request(r, group) for group in ("web", "db"))
        print(
            f"{r.scenario.name:<11} {len(r.latencies):>8} {r.rate:>8.0f} {p50:>7.1f} {p95:>7.1f} "
            f"{p99:>7.1f} {r.rate / floor:>8.2f} {web:>7} {db:>6}  {dict(r.statuses)}"
        )
    print(
        "web us / db us: CPU microseconds per request in gunicorn and in the PostgreSQL "
        "backends ('-': not readable here)"
    )
    emit = next(r for r in results if r.scenario.name == "emit")
    print(
        f"emit_rps={emit.rate:.0f} emit_p95_ms={emit.percentile_ms(95):.1f} "
        f"emit_ratio_to_floor={emit.rate / floor:.2f}"
    )


def _per_request(result: Result, group: str) -> str:
    seconds = result.cpu.get(group)
    return "-" if not seconds else f"{seconds / len(result.latencies) * 1e6:.0f}"


def run(args: argparse.Namespace) -> int:
    scratch = ScratchDatabase.beside("apibench")
    env = server_env(scratch, args)
    say(f"re-creating and migrating scratch database {scratch.name}")
    scratch.recreate(env)
    token = create_key(env)
    port = free_port()
    say(f"starting gunicorn on 127.0.0.1:{port}")
    server = start_gunicorn(env, port)
    meter = CpuMeter(server.pid, scratch)
    results, emitted = [], 0
    try:
        for scenario in SCENARIOS:
            say(f"{scenario.name}: {args.requests} requests, {args.concurrency} clients")
            runs = [drive(port, scenario, token, n, args.concurrency, args.client_procs, meter)
                    for n in (args.warmup, args.requests) if n]  # fmt: skip
            results.append(runs[-1])
            emitted += sum(len(r.latencies) for r in runs) if scenario.emits else 0
    finally:
        stop(server)
    report(results, args, env)
    return check(results, scratch, emitted)


def check(results: list[Result], scratch: ScratchDatabase, emitted: int) -> int:
    problems = [
        f"{r.scenario.name}: statuses {dict(r.statuses)}, expected only {r.scenario.expect}"
        for r in results
        if set(r.statuses) != {r.scenario.expect}
    ]
    events, deliveries = count_events(scratch)
    if (events, deliveries) != (emitted, emitted):
        problems.append(f"{emitted} emits wrote {events} events and {deliveries} deliveries")
    for problem in problems:
        say(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    os.chdir(REPO_ROOT)
    sys.exit(run(parse_args(None)))
