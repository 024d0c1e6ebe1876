"""What a ready-queue storage layout would allow the drain's statements: a measured option for
the storage redesign, beside the raw SKIP LOCKED ceiling, in one run.

Today a delivery is one row of `eventbus_delivery` that every transition updates (pending ->
processing at the claim, processing -> done at the ack). Each update changes `status`, which the
partial indexes name, so none is HOT: every claim and every ack writes a new row version and new
entries in the primary key, the `(event_id, consumer)` unique index and the lease or done index.
`bench/drain.py`'s `bus2` measures those statements.

The layout measured here splits the row by life stage, the way graphile-worker keeps a narrow
jobs table it deletes from:

- `rq_ready`: the deliveries that are due or will be (what emit would insert), indexed for the
  claim only;
- `rq_lease`: the claimed ones (the claim moves rows here in one statement: DELETE ... RETURNING
  feeding an INSERT, with the lease token and deadline the fencing needs);
- `rq_history`: the settled ones, written once, by the ack (the lease rows it deletes, inserted
  as done), with the unique `(event_id, consumer)` and the done index today's screens read.

Both statements read the event's payload from `rq_event` as the bus's claim does. What this
layout leaves out, and a real adoption would have to rebuild: fairness across organizations (one
organization here), ordering keys, priorities beyond one index column, the events' summary,
retries (a failed delivery would go back to `rq_ready`), the reaper (expired leases back to
`rq_ready`), isolation, replay, reprocess, archive and the partitioned layout, the DLQ screens,
LGPD over the history, and the migration of a live backlog. The figure is an upper bound for
what such a redesign buys on the drain's hot path, measured, not a design that is built.

Run: `python3 -m dev db` in one shell, then `.venv/bin/python bench/ready_queue.py` (options:
--events, --repeat, --batch-size). It re-creates `<DATABASE_URL's name>_rq` on the same server
and uses nothing else. For today's statements on the same machine, run
`bench/drain.py --only bus2` next to it: both print their ratio to their own run's ceiling.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import uuid
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run as a script: make `bench`, `eventbus`, ... importable

from bench.drain import (  # noqa: E402  (needs the sys.path line above)
    BenchError,
    Sample,
    fmt_rate,
    run_workers,
    sample_from,
    say,
    scratch_beside,
)
from bench.workers import (  # noqa: E402
    RAW_TABLE,
    Batch,
    Probe,
    _claim_and_ack,
    _emit,
    _finished,
    _wait_for_start,
)

CONSUMER = "bench-ready-queue"

SCHEMA = f"""
CREATE TABLE {RAW_TABLE} (id bigserial PRIMARY KEY, status text NOT NULL, payload jsonb NOT NULL,
                          next_at timestamptz NOT NULL);
CREATE INDEX {RAW_TABLE}_pending_idx ON {RAW_TABLE} (next_at) WHERE status = 'pending';
CREATE TABLE rq_event (id uuid PRIMARY KEY, organization_id bigint NOT NULL, type text NOT NULL,
                       payload jsonb NOT NULL, created_at timestamptz NOT NULL);
CREATE TABLE rq_ready (id bigserial PRIMARY KEY, event_id uuid NOT NULL, consumer text NOT NULL,
                       organization_id bigint NOT NULL, priority smallint NOT NULL DEFAULT 0,
                       due_at timestamptz NOT NULL, attempts int NOT NULL DEFAULT 0);
CREATE INDEX rq_ready_claim_idx ON rq_ready (consumer, priority DESC, due_at);
CREATE TABLE rq_lease (id bigint PRIMARY KEY, event_id uuid NOT NULL, consumer text NOT NULL,
                       organization_id bigint NOT NULL, attempts int NOT NULL, token uuid NOT NULL,
                       worker text NOT NULL, locked_until timestamptz NOT NULL);
CREATE INDEX rq_lease_until_idx ON rq_lease (locked_until);
CREATE TABLE rq_history (id bigint PRIMARY KEY, event_id uuid NOT NULL, consumer text NOT NULL,
                         organization_id bigint NOT NULL, status text NOT NULL,
                         attempts int NOT NULL, finished_at timestamptz NOT NULL,
                         UNIQUE (event_id, consumer));
CREATE INDEX rq_history_done_idx ON rq_history (consumer, finished_at) WHERE status = 'done';
"""

# One statement: take up to %(batch)s due rows, move them to the lease table with this claim's
# token, return them with their event's payload (as the bus's claim returns the event).
CLAIM_SQL = """
WITH taken AS (
    DELETE FROM rq_ready
     WHERE id = ANY(ARRAY(
            SELECT id FROM rq_ready
             WHERE consumer = %(consumer)s AND due_at <= now()
             ORDER BY priority DESC, due_at
             LIMIT %(batch)s
               FOR UPDATE SKIP LOCKED))
    RETURNING id, event_id, consumer, organization_id, attempts
), leased AS (
    INSERT INTO rq_lease (id, event_id, consumer, organization_id, attempts, token, worker,
                          locked_until)
    SELECT id, event_id, consumer, organization_id, attempts + 1, %(token)s, %(worker)s,
           now() + interval '5 minutes'
      FROM taken
    RETURNING id, event_id
)
SELECT l.id, e.type, e.payload, e.organization_id
  FROM leased l JOIN rq_event e ON e.id = l.event_id
"""

# One statement: the leases this token still holds become history rows, written once.
ACK_SQL = """
WITH settled AS (
    DELETE FROM rq_lease WHERE id = ANY(%(ids)s) AND token = %(token)s
    RETURNING id, event_id, consumer, organization_id, attempts
), written AS (
    INSERT INTO rq_history (id, event_id, consumer, organization_id, status, attempts, finished_at)
    SELECT id, event_id, consumer, organization_id, 'done', attempts, now() FROM settled
    RETURNING 1
)
SELECT count(*) FROM written
"""


def run_worker(conninfo: str, batch_size: int) -> Probe:
    """Wait for the start signal, then claim and ack until a claim comes back empty."""
    probe = Probe()
    worker = f"rq:{uuid.uuid4()}"
    probe.t_start = _wait_for_start()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.adapters.register_loader("jsonb", psycopg.types.string.TextLoader)

        def claim() -> Batch:
            token = uuid.uuid4()
            params = {"consumer": CONSUMER, "batch": batch_size, "token": token, "worker": worker}
            return token, conn.execute(CLAIM_SQL, params).fetchall()

        def ack(token: uuid.UUID | None, ids: list[int]) -> int:
            [(acked,)] = conn.execute(ACK_SQL, {"ids": ids, "token": token}).fetchall()
            return int(acked)

        _claim_and_ack(probe, claim, ack)
    return _finished(probe)


class ReadyQueueBench:
    """The scratch database, its tables, and the two measurements."""

    def __init__(self, events: int, batch_size: int) -> None:
        scratch = scratch_beside("rq")
        self.events, self.batch_size = events, batch_size
        self.conninfo = scratch["scratch_conninfo"]
        with psycopg.connect(scratch["admin_conninfo"], autocommit=True) as admin:
            name = sql.Identifier(scratch["scratch_name"])
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
            admin.execute(sql.SQL("CREATE DATABASE {}").format(name))
        self.conn = psycopg.connect(self.conninfo, autocommit=True)
        self.conn.execute(SCHEMA)
        fsync = self.conn.execute("SHOW fsync").fetchone()
        say(f"scratch database {scratch['scratch_name']} (fsync {fsync[0] if fsync else '?'})")

    def settle(self, tables: Sequence[str]) -> None:
        for table in tables:
            self.conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
        self.conn.execute("CHECKPOINT")

    def workers(self, mode: str, procs: int) -> tuple[float, list[dict[str, Any]]]:
        command = [sys.executable, "-m", "bench.ready_queue", mode, "--conninfo", self.conninfo]
        command += ["--batch-size", str(self.batch_size)]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        env.setdefault("DJANGO_SETTINGS_MODULE", "deskcomm.settings")
        return run_workers([command] * procs, env)

    def raw(self, procs: int) -> Sample:
        self.conn.execute(f"TRUNCATE {RAW_TABLE} RESTART IDENTITY")
        self.conn.execute(
            f"INSERT INTO {RAW_TABLE} (status, payload, next_at) "
            "SELECT 'pending', jsonb_build_object('seq', g, 'note', 'benchmark'), now() "
            "FROM generate_series(1, %s) g",
            (self.events,),
        )
        self.settle([RAW_TABLE])
        wall, probes = self.workers("raw", procs)
        [(done,)] = self.conn.execute(
            f"SELECT count(*) FROM {RAW_TABLE} WHERE status = 'done'"
        ).fetchall()
        if done != self.events:
            raise BenchError(f"raw loop finished {done} of {self.events} rows")
        return sample_from(self.events, wall, probes)

    def ready_queue(self, procs: int) -> Sample:
        self.conn.execute("TRUNCATE rq_event, rq_ready, rq_lease, rq_history RESTART IDENTITY")
        self.conn.execute(
            "INSERT INTO rq_event (id, organization_id, type, payload, created_at) "
            "SELECT gen_random_uuid(), 1, 'bench.single', "
            "jsonb_build_object('seq', g, 'note', 'benchmark'), now() "
            "FROM generate_series(1, %s) g",
            (self.events,),
        )
        self.conn.execute(
            "INSERT INTO rq_ready (event_id, consumer, organization_id, due_at) "
            "SELECT id, %s, organization_id, created_at FROM rq_event",
            (CONSUMER,),
        )
        self.settle(["rq_event", "rq_ready", "rq_lease", "rq_history"])
        wall, probes = self.workers("worker", procs)
        counts = self.conn.execute(
            "SELECT (SELECT count(*) FROM rq_ready), (SELECT count(*) FROM rq_lease), "
            "(SELECT count(*) FROM rq_history WHERE status = 'done' AND attempts = 1)"
        ).fetchone()
        if counts != (0, 0, self.events):
            raise BenchError(f"ready queue left (ready, leased, done once) = {counts}")
        return sample_from(self.events, wall, probes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/ready_queue.py", description=__doc__)
    parser.add_argument("mode", nargs="?", default="bench", choices=("bench", "worker", "raw"))
    parser.add_argument("--conninfo", help="(worker processes)")
    parser.add_argument("--events", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args(argv)
    if args.mode != "bench":
        from bench.workers import run_raw

        run = run_worker if args.mode == "worker" else run_raw
        _emit(asdict(run(args.conninfo, args.batch_size)))
        return 0
    if args.events < 1 or args.repeat < 1 or args.batch_size < 1:
        parser.error("--events, --repeat and --batch-size must be positive")
    try:
        bench = ReadyQueueBench(args.events, args.batch_size)
    except (BenchError, psycopg.Error) as exc:
        parser.error(str(exc))
    runs: dict[str, list[Sample]] = {"raw2": [], "rq2": []}
    for round_no in range(1, args.repeat + 1):  # interleaved, so both see the same machine
        say(f"round {round_no}/{args.repeat}: raw2, rq2 ({args.events} rows each)")
        runs["raw2"].append(bench.raw(2))
        runs["rq2"].append(bench.ready_queue(2))
    ceiling = statistics.median(s.rate for s in runs["raw2"])
    print(f"{'measurement':<12} {'median/s':>10} {'runs':<32} {'÷ ceiling':>9}")
    for key, samples in runs.items():
        rate = statistics.median(s.rate for s in samples)
        each = " / ".join(fmt_rate(s.rate) for s in samples)
        print(f"{key:<12} {fmt_rate(rate):>10} {each:<32} {rate / ceiling:>9.2f}")
    ratio = statistics.median(s.rate for s in runs["rq2"]) / ceiling
    print(f"ready_queue_ratio_to_raw={ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
