"""Interleaved A/B of the no-op drain: this checkout against a baseline checkout, run by run.

Run from the repository root with the project's interpreter:

    git worktree add /tmp/baseline <commit>
    .venv/bin/python bench/ab.py --baseline /tmp/baseline [--rounds 6] [--events 40000]

Why: this machine's speed drifts by ±20% over minutes (other tenants of the host), so two
separate `bench/drain.py` runs, one per checkout, cannot show a 10% difference. Here both
checkouts are measured alternately, one measurement at a time, and the order flips every round,
so a drift hits both about equally. Each round gives a paired ratio (this ÷ baseline, same
measurement, seconds apart); the report shows the median of those ratios next to the medians
of the rates.

What one measurement is, for each checkout: its own scratch database `<dbname>_ab_<side>`
(re-created and migrated with that checkout's `manage.py`, so each runs on its own schema),
`--events` events emitted untimed by that checkout's code (`bench/bus_ops.py`) for 1 or 3 no-op
consumers, the tables VACUUM ANALYZEd and CHECKPOINTed, then 1 or 2 `drain_events --once
--no-listen --batch-size B` processes of that checkout started with bench/workers.py's start
protocol (start-up not timed). The wall rate is deliveries ÷ (start signal → last process done),
as bench/drain.py's figures; the steady rate is deliveries ÷ (first claim → last ack).

The baseline checkout must have bench/workers.py and bench/bus_ops.py (any commit since the
benchmarks exist; copy bench/bench_consumers.py into it if it predates the consumers used here).
Both run with this interpreter. Progress goes to stderr, the table to stdout; the last line is
`ab_ratio_d21=<x>`: the median paired ratio for 2 processes, 1 consumer.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import environ
import psycopg

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench` importable

from bench import drain as base  # noqa: E402  (needs the sys.path line above)
from bench.bench_consumers import (  # noqa: E402
    FANOUT_EVENT,
    ORDERED_EVENT,
    SINGLE_EVENT,
    consumers_for,
)

MEASUREMENTS = {  # key: (processes, event type)
    "d11": (1, SINGLE_EVENT),
    "d21": (2, SINGLE_EVENT),
    "d13": (1, FANOUT_EVENT),
    "d23": (2, FANOUT_EVENT),
    "o21": (2, ORDERED_EVENT),  # one consumer declared ordered=True, 200 conversations
}

RLS_BYPASS = "-c app.rls_bypass=on"  # core.rls.BYPASS_OPTION (not imported: no Django here)

# Run in a checkout (cwd) by this interpreter: emit the backlog with that checkout's code.
FILL_SCRIPT = """
import sys
import django
django.setup()
from bench import bus_ops
try:
    from core import rls
    rls.bypass_process()
except ImportError:
    pass  # a checkout from before row-level security
event_type, count, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
org = bus_ops.create_organization()
bus_ops.emit_many(org, bus_ops.items(event_type, count), chunk)
"""


@dataclass(frozen=True)
class Side:
    """One checkout, with its scratch database."""

    name: str  # "this" or "baseline"
    root: Path
    scratch_name: str
    scratch_url: str
    scratch_conninfo: str

    def env(self) -> dict[str, str]:
        env = base.scratch_env(self.scratch_url, base.BENCH_MODULE)
        env["PYTHONPATH"] = str(self.root)  # this side's code, not the driver's
        # A platform process, as `manage.py drain_events` is (core.rls.wants_bypass): the
        # workers start as `python -m bench.workers`, which core.rls cannot tell from a server.
        env["DB_RLS_BYPASS"] = "true"
        return env


@dataclass
class Results:
    wall: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    steady: dict[tuple[str, str], list[float]] = field(default_factory=dict)

    def add(self, side: str, key: str, sample: base.Sample) -> None:
        self.wall.setdefault((side, key), []).append(sample.rate)
        if sample.steady_rate is not None:
            self.steady.setdefault((side, key), []).append(sample.steady_rate)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout")
    parser.add_argument("--rounds", type=int, default=6, help="paired runs per measurement")
    parser.add_argument("--events", type=int, default=40000, help="events per measurement")
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument(
        "--only", default="d11,d21,d13,d23", help="measurements, of " + ", ".join(MEASUREMENTS)
    )
    args = parser.parse_args(argv)
    args.only = [k for k in args.only.replace(" ", "").split(",") if k]
    unknown = sorted(set(args.only) - set(MEASUREMENTS))
    if unknown:
        parser.error(f"--only: unknown measurement(s) {', '.join(unknown)}")
    if args.rounds < 1 or args.events < 1:
        parser.error("--rounds and --events must be positive")
    missing = [
        p for p in ("manage.py", "bench/workers.py", "bench/bus_ops.py")
        if not (args.baseline / p).is_file()
    ]  # fmt: skip
    if missing:
        parser.error(f"--baseline {args.baseline}: not a usable checkout (no {', '.join(missing)})")
    return args


def make_side(name: str, root: Path, base_url: str) -> Side:
    scratch_name = f"{environ.Env.db_url_config(base_url)['NAME']}_ab_{name}"
    url = urlunsplit(urlsplit(base_url)._replace(path="/" + quote(scratch_name)))
    # The driver's own checks count every tenant's rows: its sessions bypass row-level
    # security, as bench/drain.py's do (there through core.rls.bypass_process()).
    conninfo = psycopg.conninfo.make_conninfo(base.libpq_conninfo(url), options=RLS_BYPASS)
    return Side(name, root.resolve(), scratch_name, url, conninfo)


def prepare(side: Side, admin_conninfo: str) -> None:
    """Re-create the side's scratch database and migrate it with the side's own code."""
    base.say(f"{side.name}: re-creating {side.scratch_name} ({side.root})")
    base.recreate_database(admin_conninfo, side.scratch_name, side.env(), root=side.root)


def run_in(side: Side, args: Sequence[str]) -> None:
    result = subprocess.run(
        [sys.executable, *args],
        cwd=side.root,
        env=side.env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=base.WORKER_TIMEOUT,
    )
    if result.returncode != 0:
        raise base.BenchError(
            f"{side.name}: {' '.join(args[:2])} failed ({result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )


def measure(side: Side, key: str, config: argparse.Namespace) -> base.Sample:
    """Fill the side's backlog (untimed), then time its drain processes."""
    procs, event_type = MEASUREMENTS[key]
    names = consumers_for(event_type)
    admin = base.Admin(side.scratch_conninfo)
    try:
        admin.reset_bus()
        run_in(side, ["-c", FILL_SCRIPT, event_type, str(config.events), str(base.FILL_CHUNK)])
        admin.settle()
        args = ["--once", "--no-listen", "--batch-size", str(config.batch_size)]
        for name in names:
            args += ["--consumer", name]
        command = [sys.executable, "-m", "bench.workers", "drain", "--", *args]
        wall, probes = base.run_workers([command] * procs, side.env(), cwd=side.root)
        expected = config.events * len(names)
        done = admin.rows("SELECT count(*) FROM eventbus_delivery WHERE status = 'done'")[0][0]
        if done != expected:
            raise base.BenchError(f"{side.name} {key}: {done} of {expected} deliveries done")
    finally:
        admin.close()
    return base.sample_from(expected, wall, probes)


def report(config: argparse.Namespace, results: Results, ratios: dict[str, list[float]]) -> None:
    print(
        f"Drain A/B: this checkout ({REPO_ROOT}) vs baseline ({config.baseline}), "
        f"{config.events:,} events per measurement, batch {config.batch_size}, "
        f"{config.rounds} interleaved rounds"
    )
    header = (
        f"{'measurement':<26}{'this (wall/s)':>15}{'baseline':>11}{'paired ÷':>10}"
        f"{'  range':<14}{'this steady':>13}{'baseline':>11}"
    )
    print(header)
    print("-" * len(header))
    for key in config.only:
        procs, event_type = MEASUREMENTS[key]
        label = f"{key}: {procs} proc, {len(consumers_for(event_type))} consumer(s)"
        this = statistics.median(results.wall[("this", key)])
        other = statistics.median(results.wall[("baseline", key)])
        steady = [
            statistics.median(results.steady.get((s, key), [0.0])) for s in ("this", "baseline")
        ]
        spread = f"  {min(ratios[key]):.2f}-{max(ratios[key]):.2f}"
        print(
            f"{label:<26}{this:>15,.0f}{other:>11,.0f}{statistics.median(ratios[key]):>10.2f}"
            f"{spread:<14}{steady[0]:>13,.0f}{steady[1]:>11,.0f}"
        )
    print(
        "paired ÷: median over the rounds of (this ÷ baseline), the two measured seconds apart; "
        "range: the lowest and highest round."
    )
    if "d21" in ratios:
        print(f"ab_ratio_d21={statistics.median(ratios['d21']):.2f}")


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    base_url = base.database_url()
    admin_conninfo = base.libpq_conninfo(base_url, dbname="postgres")
    sides = [
        make_side("this", REPO_ROOT, base_url),
        make_side("baseline", config.baseline, base_url),
    ]
    try:
        for side in sides:
            prepare(side, admin_conninfo)
        results = Results()
        ratios: dict[str, list[float]] = {key: [] for key in config.only}
        for round_ in range(config.rounds):
            order = sides if round_ % 2 == 0 else sides[::-1]  # drift hits both sides alike
            for key in config.only:
                rates = {}
                for side in order:
                    sample = measure(side, key, config)
                    results.add(side.name, key, sample)
                    rates[side.name] = sample.rate
                    base.say(f"round {round_ + 1} {key} {side.name}: {sample.rate:,.0f}/s")
                ratios[key].append(rates["this"] / rates["baseline"])
    except base.BenchError as exc:
        sys.stderr.write(f"bench/ab.py: {exc}\n")
        return 1
    report(config, results, ratios)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
