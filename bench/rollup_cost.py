"""The rollup's cost per settled batch: the ack statement with and without its rollup upsert.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/rollup_cost.py [--batch 1000] [--rounds 40] [--organizations 1]
                                          [--consumers 1] [--baseline 86f6c6c]

Why: the rollup adds no statement to the hot path, only a CTE to ack.sql and nack.sql, so its
cost is inside the ack's time; a whole drain on this shared machine drifts by more than that
(bench/ab.py shows it). Here only the statement changes: the same server, table and batch, the
ack of this checkout (`eventbus/store/sql/ack.sql`, with the upsert) and of the baseline commit (the
same file at `--baseline`, without it), alternately, the order flipped every round.

What one round is: `--batch` events spread over `--organizations` tenants, each with a delivery
per consumer (`--consumers`), all `processing` under one lease token, written server-side
(untimed); then one ack statement of them all and its commit (timed), once per variant. The
scratch database `<dbname>_rollup_cost` is re-created and migrated by this checkout, so both
variants run on the schema with the rollup table; the baseline's statement simply never writes
it. Prints the medians (ms per ack) and the median of the paired ratios (with ÷ without); the
last line is `rollup_ack_ratio=<x>`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import environ
import psycopg

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench` importable

from bench.drain import (  # noqa: E402
    database_url,
    libpq_conninfo,
    recreate_database,
    say,
    scratch_env,
)

SEED_SQL = """
WITH orgs AS (SELECT array_agg(id ORDER BY slug) AS ids FROM deskcomm_organization),
events AS (
    INSERT INTO event_log (id, organization_id, event_type, entity_kind, entity_id, payload,
                           metadata, consumed_by, attempts, status, fanout, created_at,
                           updated_at)
    SELECT gen_random_uuid(), orgs.ids[1 + i %% cardinality(orgs.ids)], 'bench.noop', 'bench',
           gen_random_uuid(), '{}'::jsonb, '{}'::jsonb, '{}', 0, 'processing',
           cardinality(%(consumers)s::text[]), now(), now()
      FROM generate_series(1, %(events)s::int) AS i CROSS JOIN orgs
    RETURNING id, organization_id
)
INSERT INTO eventbus_delivery (event_id, organization_id, consumer, event_type, status, attempts,
                               max_attempts, next_attempt_at, created_at, updated_at,
                               locked_until, locked_by, lease_token, event_created_at)
SELECT e.id, e.organization_id, c, 'bench.noop', 'processing', 1, 8, now(), now(), now(),
       now() + interval '5 minutes', 'bench', %(token)s, now()
  FROM events e CROSS JOIN unnest(%(consumers)s::text[]) AS c
RETURNING id
"""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--batch", type=int, default=1000, help="deliveries per ack")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--organizations", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--baseline", default="86f6c6c", help="commit whose ack.sql is 'without'")
    return parser.parse_args(argv)


def statements(baseline: str) -> dict[str, str]:
    without = subprocess.run(
        ["git", "show", f"{baseline}:eventbus/store/sql/ack.sql"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "eventbus_rollup" not in without, "the baseline's ack already writes the rollup"
    return {"with": (REPO_ROOT / "eventbus/store/sql/ack.sql").read_text(), "without": without}


def time_ack(conn: psycopg.Connection[Any], ack: str, args: argparse.Namespace) -> float:
    token = uuid.uuid4()
    consumers = [f"bench-{i}-worker" for i in range(args.consumers)]
    seed = {"events": args.batch // args.consumers, "consumers": consumers, "token": token}
    ids = [row[0] for row in conn.execute(SEED_SQL, seed).fetchall()]
    conn.commit()
    started = time.perf_counter()
    [(acked,)] = conn.execute(ack, {"ids": ids, "token": token, "now": "now"}).fetchall()
    conn.commit()
    elapsed = (time.perf_counter() - started) * 1000
    assert acked == len(ids), (acked, len(ids))
    return elapsed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    url = database_url()
    scratch = f"{environ.Env.db_url_config(url)['NAME']}_rollup_cost"
    admin = libpq_conninfo(url, dbname="postgres")
    target = libpq_conninfo(url, dbname=scratch)
    recreate_database(admin, scratch, scratch_env(_url_for(url, scratch), "bench.bench_consumers"))
    acks = statements(args.baseline)
    times: dict[str, list[float]] = {"with": [], "without": []}
    ratios = []
    with psycopg.connect(target) as conn:
        conn.execute(
            "INSERT INTO deskcomm_organization (id, name, slug, created_at) SELECT "
            "gen_random_uuid(), 'T' || i, 't-' || i, now() FROM generate_series(1, %s) i",
            [args.organizations],
        )
        for variant in ("with", "without"):  # warm-up
            time_ack(conn, acks[variant], args)
        for r in range(args.rounds):
            order = ("with", "without") if r % 2 == 0 else ("without", "with")
            now = {variant: time_ack(conn, acks[variant], args) for variant in order}
            for variant, ms in now.items():
                times[variant].append(ms)
            ratios.append(now["with"] / now["without"])
    report(args, times, ratios)
    return 0


def _url_for(url: str, dbname: str) -> str:
    head, _, _ = url.rpartition("/")
    return f"{head}/{dbname}"


def report(args: argparse.Namespace, times: dict[str, list[float]], ratios: list[float]) -> None:
    print(
        f"ack of {args.batch} deliveries ({args.organizations} organization(s) x "
        f"{args.consumers} consumer(s)), {args.rounds} paired rounds, ms per ack + commit:"
    )
    for variant, values in times.items():
        print(
            f"  {variant:>7} rollup: median {statistics.median(values):7.2f}  "
            f"min {min(values):7.2f}  max {max(values):7.2f}"
        )
    say("done")
    print(f"rollup_ack_ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    raise SystemExit(main())
