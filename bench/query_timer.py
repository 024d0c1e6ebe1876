"""What the SQL statement timer (`core.metrics.time_queries`, the histogram behind alert A11 and
the DB-query SLO) costs the hottest statement-per-call path, `eventbus.emit()`.

Run from the repository root with the project's interpreter (the embedded server's
`DATABASE_URL`, e.g. from `python3 -m dev db`):

    .venv/bin/python bench/query_timer.py [--events 3000] [--rounds 8]

One process, one scratch database (`<name>_qtimer`, re-created and migrated). Each round times
`--events` calls of `eventbus.emit()` in one transaction twice: once with the timer installed on
the connection (as every process runs) and once with it removed, in an order that flips every
round, so the machine's drift hits both sides alike. Printed: each round's rates, the median
paired ratio (timed ÷ untimed; 1.00 = free) and its range; the last line is
`query_timer_ratio=<x>`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench` importable

from bench import drain as base  # noqa: E402  (needs the sys.path line above)
from bench import scratch  # noqa: E402
from bench.bench_consumers import FANOUT_EVENT  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=3000, help="emits per side per round")
    parser.add_argument("--rounds", type=int, default=8, help="paired rounds (default 8)")
    args = parser.parse_args(argv)
    if args.events < 1 or args.rounds < 1:
        parser.error("--events and --rounds must be positive")

    target = scratch.ScratchDatabase.beside("qtimer")
    env = base.scratch_env(target.url, base.BENCH_MODULE)
    env.update(scratch.production_settings())
    base.say(f"re-creating scratch database {target.name}")
    base.recreate_database(base.libpq_conninfo(base.database_url()), target.name, env)

    os.environ.update(env)
    import django

    django.setup()
    from django.db import connection

    from bench import bus_ops
    from core import rls
    from core.metrics import time_queries

    rls.bypass_process()  # a platform process: it emits for the bench's tenant directly
    admin = base.Admin(target.conninfo())
    org = bus_ops.create_organization()
    connection.ensure_connection()

    def timed(install: bool) -> float:
        admin.reset_bus()
        wrappers = connection.execute_wrappers
        if install and time_queries not in wrappers:
            wrappers.append(time_queries)
        if not install and time_queries in wrappers:
            wrappers.remove(time_queries)
        batch = bus_ops.items(FANOUT_EVENT, args.events)
        return args.events / bus_ops.emit_loop(org, batch)

    timed(True)  # warm-up: plans, caches
    ratios: list[float] = []
    for n in range(args.rounds):
        order = (True, False) if n % 2 == 0 else (False, True)
        rates = {side: timed(side) for side in order}
        ratios.append(rates[True] / rates[False])
        base.say(
            f"round {n + 1}: timed {rates[True]:,.0f} emits/s, untimed {rates[False]:,.0f}"
            f" -> {ratios[-1]:.3f}"
        )
    print(
        f"emit() with the statement timer ÷ without, {args.rounds} paired rounds of "
        f"{args.events} emits: median {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f})"
    )
    print(f"query_timer_ratio={statistics.median(ratios):.3f}")
    admin.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
