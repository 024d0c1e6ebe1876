"""Head-of-line benchmark: handlers that take time, and a few that take much longer.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/isolation.py [--events N] [--concurrency C] [--rate R] [--quick]

What it measures, in one run against one PostgreSQL server (a scratch database
`<dbname>_bench_isolation`, re-created and migrated first, as bench/drain.py does):

1. Throughput, deliveries/s: a backlog of N events for one consumer whose handler sleeps 1 ms,
   drained by one `drain_events --once --concurrency C` process (start-up not timed: the
   bench/workers.py start protocol), once with every handler at 1 ms and once with 1% of them
   at 200 ms.
2. Latency of the quick deliveries, open loop: events arrive at R/s for N/R seconds (1% of them
   200 ms, the rest 1 ms) while one `drain_events --concurrency C` process runs; emit-to-ack
   latency (`finished_at - created_at`) p50 and p99 of the 1 ms deliveries.
3. The baseline, measured in the same run: the same handler-time distribution run by C bare
   Python threads from one queue (no database): what C slots can do at best on this machine.
   Every throughput is printed with its ratio to that ceiling; every latency with the ceiling's
   own p99 wait.

Where the drain waits for its slowest handler before settling or claiming (the old batch loop),
the 1% case loses most of its throughput and the quick deliveries' p99 follows the slow ones.
"""

from __future__ import annotations

import argparse
import os
import queue
import random
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench import drain as base  # noqa: E402  (needs the sys.path line above)
from bench.bench_consumers import SLEEP_CONSUMER, SLEEP_EVENT  # noqa: E402

SLOW_MS = 200.0
QUICK_MS = 1.0
SLOW_SHARE = 0.01


@dataclass(frozen=True)
class Config:
    events: int
    concurrency: int
    rate: float
    batch_size: int
    scratch: base.Config


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=None, help="default 6000 (1000 quick)")
    parser.add_argument("--concurrency", type=int, default=8, help="handler slots (default 8)")
    parser.add_argument("--rate", type=float, default=1000.0, help="open-loop events/s")
    parser.add_argument("--batch-size", type=int, default=100, help="claim size (default 100)")
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args(argv)
    events = args.events or (1000 if args.quick else 6000)
    if events < 100 or args.concurrency < 1 or args.rate <= 0 or args.batch_size < 1:
        parser.error("--events >= 100, --concurrency >= 1, --rate > 0, --batch-size >= 1")
    scratch = base.parse_args(["--quick"])
    name = f"{scratch.scratch_name}_isolation"
    url = scratch.scratch_url.replace(scratch.scratch_name, name)
    scratch = base.Config(
        **{
            **scratch.__dict__,
            "scratch_name": name,
            "scratch_url": url,
            "scratch_conninfo": base.libpq_conninfo(url),
        }
    )
    return Config(events, args.concurrency, args.rate, args.batch_size, scratch)


def durations(n: int, *, slow_share: float, seed: int = 7) -> list[float]:
    """Handler times in ms: `slow_share` of them SLOW_MS (spread evenly), the rest QUICK_MS."""
    rng = random.Random(seed)
    slow = set(rng.sample(range(n), round(n * slow_share)))
    return [SLOW_MS if i in slow else QUICK_MS for i in range(n)]


def thread_ceiling(times_ms: Sequence[float], slots: int) -> float:
    """C bare threads sleeping the same times from one queue: items/s."""
    work: queue.SimpleQueue[tuple[int, float]] = queue.SimpleQueue()
    for item in enumerate(times_ms):
        work.put(item)
    finished = [0.0] * len(times_ms)

    def serve() -> None:
        while True:
            try:
                index, ms = work.get_nowait()
            except queue.Empty:
                return
            time.sleep(ms / 1000)
            finished[index] = time.monotonic()

    started = time.monotonic()
    threads = [threading.Thread(target=serve) for _ in range(slots)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(times_ms) / (max(finished) - started)


def emit_items(ms: Sequence[float]) -> list[dict[str, Any]]:
    return [
        {"event_type": SLEEP_EVENT, "entity_kind": "bench_item", "payload": {"seq": i, "ms": t}}
        for i, t in enumerate(ms)
    ]


class Run:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.env = base.scratch_env(config.scratch.scratch_url, base.BENCH_MODULE)
        base.recreate_database(config.scratch.admin_conninfo, config.scratch.scratch_name, self.env)
        self.ops = base.setup_django(config.scratch)
        self.admin = base.Admin(config.scratch.scratch_conninfo)
        self.org = self.ops.create_organization()

    def args(self, *extra: str) -> list[str]:
        concurrency = str(self.config.concurrency)
        loop = [
            "--no-listen",
            "--poll-interval",
            "0.05",
            "--batch-size",
            str(self.config.batch_size),
        ]
        return [*loop, "--concurrency", concurrency, "--consumer", SLEEP_CONSUMER, *extra]

    def backlog(self, ms: Sequence[float]) -> float:
        """Drain a backlog of events with these handler times: deliveries/s."""
        self.admin.reset_bus()
        self.ops.emit_many(self.org, emit_items(ms), base.FILL_CHUNK)
        self.admin.settle()
        command = [sys.executable, "-m", "bench.workers", "drain", "--", *self.args("--once")]
        wall, _ = base.run_workers([command], self.env)
        self._check_done(len(ms))
        return len(ms) / wall

    def open_loop(self, ms: Sequence[float]) -> tuple[float, float]:
        """Emit at the configured rate while one worker drains: (p50, p99) seconds of quick ones."""
        self.admin.reset_bus()
        limit = str(len(ms))
        command = [sys.executable, str(REPO_ROOT / "manage.py"), "drain_events"]
        worker = subprocess.Popen([*command, *self.args("--max-events", limit)], env=self.env)
        try:
            self._wait_for_worker(worker)
            self._emit_at_rate(emit_items(ms))
            worker.wait(timeout=base.WORKER_TIMEOUT)
        finally:
            if worker.poll() is None:
                worker.kill()
        self._check_done(len(ms))
        [(p50, p99)] = self.admin.rows(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY lat),"
            "       percentile_cont(0.99) WITHIN GROUP (ORDER BY lat)"
            "  FROM (SELECT extract(epoch FROM d.finished_at - e.created_at) AS lat"
            "          FROM eventbus_delivery d JOIN event_log e ON e.id = d.event_id"
            "         WHERE (e.payload ->> 'ms')::float < %s) q",
            (SLOW_MS,),
        )
        return float(p50), float(p99)

    def _wait_for_worker(self, worker: subprocess.Popen[bytes]) -> None:
        """Until the worker has connected (its start-up is not what is measured)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and worker.poll() is None:
            [(others,)] = self.admin.rows(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
            if others >= 2:  # this process's Django connection and the worker's
                return
            time.sleep(0.05)
        raise base.BenchError("the drain worker did not connect")

    def _emit_at_rate(self, items: list[dict[str, Any]]) -> None:
        tick = 0.02
        per_tick = max(1, round(self.config.rate * tick))
        started = time.monotonic()
        for n, start in enumerate(range(0, len(items), per_tick)):
            self.ops.emit_many(self.org, items[start : start + per_tick], per_tick)
            delay = started + (n + 1) * tick - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the producer (open loop), not waiting for a result

    def _check_done(self, n: int) -> None:
        rows = self.admin.rows("SELECT status, count(*) FROM eventbus_delivery GROUP BY status")
        if rows != [("done", n)]:
            raise base.BenchError(f"expected {n} deliveries done, found {rows}")


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    load = [os.getloadavg()[0]]
    run = Run(config)
    quick = durations(config.events, slow_share=0.0)
    mixed = durations(config.events, slow_share=SLOW_SHARE)
    ceiling_quick = thread_ceiling(quick, config.concurrency)
    ceiling_mixed = thread_ceiling(mixed, config.concurrency)
    base.say("draining the 1 ms backlog")
    quick_rate = run.backlog(quick)
    base.say("draining the backlog with 1% at 200 ms")
    mixed_rate = run.backlog(mixed)
    base.say(f"open loop at {config.rate:.0f} events/s")
    p50, p99 = run.open_loop(mixed)
    run.admin.close()
    load.append(os.getloadavg()[0])
    c = config.concurrency
    print(
        f"head-of-line benchmark: {config.events:,} events, --concurrency {c}, "
        f"batch {config.batch_size}; load average {load[0]:.2f} -> {load[1]:.2f}"
    )
    print(f"{'measurement':58} {'figure':>12} {'baseline':>12} {'ratio':>6}")
    rows = [
        ("throughput, all handlers 1 ms (deliveries/s)", quick_rate, ceiling_quick),
        ("throughput, 1% of handlers 200 ms (deliveries/s)", mixed_rate, ceiling_mixed),
    ]
    for label, value, ceiling in rows:
        print(f"{label:58} {value:>12,.0f} {ceiling:>12,.0f} {value / ceiling:>6.2f}")
    print(f"{'open loop 1% slow, quick ones emit->ack p50 (ms)':58} {p50 * 1000:>12.1f}")
    print(
        f"{'open loop 1% slow, quick ones emit->ack p99 (ms)':58} {p99 * 1000:>12.1f}"
        f" {SLOW_MS:>12.0f} {p99 * 1000 / SLOW_MS:>6.2f}"
    )
    print(f"mixed_throughput_ratio={mixed_rate / ceiling_mixed:.2f}")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except base.BenchError as exc:
        base.say(f"FAILED: {exc}")
        raise SystemExit(1) from None
