"""Worker processes for bench/drain.py: `python -m bench.workers {drain,bus,insert,raw} ...`.

Start protocol (so process start-up is not timed): the worker loads everything it needs, prints
one JSON line `{"ready": true}` to stdout, then blocks reading one byte from stdin. The parent
writes that byte to every worker at once (the start signal) and takes its start time just before.
When done, the worker prints one JSON line with its results, including `t_end`, a
`time.monotonic()` reading (CLOCK_MONOTONIC, comparable across processes on Linux).

- `drain`: `django.setup()` with the environment the parent passes (scratch `DATABASE_URL`,
  `EVENTBUS_HANDLER_MODULES=bench.bench_consumers`), then, after the start signal, the real
  `drain_events` management command through `call_command` with the given arguments (so it
  includes `sync_routes()`, the worker's start-up jitter and its final empty claim). `claim` and
  `ack` in `eventbus.dispatch.claim` are wrapped (from here, not in the product) to time them.
- `bus`: the bus's own claim and ack statements (`eventbus/store/sql/claim.sql`, `ack.sql`, the same
  parameters `eventbus.dispatch.claim` passes) in a bare psycopg loop with nothing between them: no
  Django, no Event objects, no handler, no settle logic. JSON columns come back as text, as in
  the product. It says what this schema and these statements allow before any Python runs.
- `insert`: the write benchmarks' floor (issue 49): a bare psycopg loop, autocommit, of the
  handlers' own `INSERT ... ON CONFLICT DO UPDATE` (bench/bench_consumers.py `WRITE_SQL`), one
  per (seq, consumer) of this process's share (`--part` of `--parts`, seqs round robin).
- `raw`: a bare psycopg loop on the `bench_raw_job` table: claim a batch with
  `UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP LOCKED LIMIT n)) RETURNING`, then
  ack the batch with `UPDATE ... WHERE id = ANY(%s)`, each statement its own transaction.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import django
import psycopg
from django.core.management import call_command, get_commands, load_command_class

from bench.bench_consumers import WRITE_KEYS, WRITE_SQL
from eventbus.dispatch import claim as claims
from eventbus.store.sql import statement

RAW_TABLE = "bench_raw_job"

RAW_CLAIM_SQL = f"""
UPDATE {RAW_TABLE} SET status = 'processing'
 WHERE id = ANY(ARRAY(
        SELECT id FROM {RAW_TABLE}
         WHERE status = 'pending' AND next_at <= now()
         ORDER BY next_at
         LIMIT %s
           FOR UPDATE SKIP LOCKED))
RETURNING id, payload
"""

RAW_ACK_SQL = f"UPDATE {RAW_TABLE} SET status = 'done' WHERE id = ANY(%s)"


@dataclass
class Probe:
    """What one worker process did, timed from inside the process."""

    t_start: float = 0.0  # start signal received
    t_end: float = 0.0  # drain finished (before interpreter teardown)
    first_claim: float | None = None  # start of the first claim statement
    last_ack: float | None = None  # end of the last ack that changed rows
    claims: int = 0  # claims that returned rows (the final empty one is not counted)
    claimed: int = 0
    acked: int = 0
    claim_s: float = 0.0  # in claims that returned rows
    ack_s: float = 0.0
    peak_rss_mb: float = 0.0  # this process's peak resident set (VmHWM), at the end


def _emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def _wait_for_start() -> float:
    _emit({"ready": True})
    if sys.stdin.buffer.read(1) == b"":
        raise SystemExit("bench worker: stdin closed before the start signal")
    return time.monotonic()


def _wrap_claim(probe: Probe, original: Callable[..., Any]) -> Callable[..., Any]:
    def claim(*args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        if probe.first_claim is None:
            probe.first_claim = started
        result = original(*args, **kwargs)
        if result.events:
            probe.claim_s += time.monotonic() - started
            probe.claims += 1
            probe.claimed += len(result.events)
        return result

    return claim


def _wrap_ack(probe: Probe, original: Callable[..., int]) -> Callable[..., int]:
    def ack(*args: Any, **kwargs: Any) -> int:
        started = time.monotonic()
        changed = original(*args, **kwargs)
        finished = time.monotonic()
        probe.ack_s += finished - started
        probe.acked += changed
        if changed:
            probe.last_ack = finished
        return changed

    return ack


def run_drain(command_args: Sequence[str]) -> Probe:
    """Load Django, wait for the start signal, run `drain_events` with `command_args`."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "deskcomm.settings")
    django.setup()
    load_command_class(get_commands()["drain_events"], "drain_events")  # import it untimed
    probe = Probe()
    claims.claim = _wrap_claim(probe, claims.claim)  # type: ignore[assignment]
    claims.ack = _wrap_ack(probe, claims.ack)  # type: ignore[assignment]
    probe.t_start = _wait_for_start()
    call_command("drain_events", *command_args)
    return _finished(probe)


def run_raw(conninfo: str, batch_size: int) -> Probe:
    """Wait for the start signal, then claim and ack batches until a claim comes back empty."""
    probe = Probe()
    probe.t_start = _wait_for_start()
    with psycopg.connect(conninfo, autocommit=True) as conn:

        def claim() -> Batch:
            return None, conn.execute(RAW_CLAIM_SQL, (batch_size,)).fetchall()

        def ack(token: uuid.UUID | None, ids: list[int]) -> int:
            return conn.execute(RAW_ACK_SQL, (ids,)).rowcount

        _claim_and_ack(probe, claim, ack)  # the no-op "handler": payloads are decoded already
    return _finished(probe)


def run_bus(conninfo: str, batch_size: int, consumers: Sequence[str]) -> Probe:
    """Wait for the start signal, then run claim.sql and ack.sql (each its own transaction, as
    the drain does) until a claim comes back empty. The session bypasses row-level security,
    as a drain worker's does (core.rls)."""
    probe = Probe()
    claim_sql, ack_sql = statement("claim"), statement("ack")
    worker = f"bus-sql:{os.getpid()}"
    probe.t_start = _wait_for_start()
    with psycopg.connect(conninfo, autocommit=True) as conn:  # connected in the timed window,
        conn.execute("SELECT set_config('app.rls_bypass', 'on', false)")  # as `raw` is
        conn.adapters.register_loader("jsonb", psycopg.types.string.TextLoader)

        def claim() -> Batch:
            now, token = dt.datetime.now(dt.UTC), uuid.uuid4()
            params = {
                "consumers": list(consumers),
                "probing": [],
                "key_start": str(uuid.uuid4()),
                "per_key": 1,
                "start": uuid.uuid4(),
                "batch": batch_size,
                "now": now,
                "token": token,
                "worker": worker,
                "lease_until": now + dt.timedelta(minutes=5),
            }
            return token, conn.execute(claim_sql, params).fetchall()

        def ack(token: uuid.UUID | None, ids: list[int]) -> int:
            params = {"ids": ids, "token": token, "now": dt.datetime.now(dt.UTC)}
            [(acked,)] = conn.execute(ack_sql, params).fetchall()
            return int(acked)

        _claim_and_ack(probe, claim, ack)
    return _finished(probe)


def run_insert(conninfo: str, count: int, part: int, parts: int, consumers: Sequence[str]) -> Probe:
    """Wait for the start signal, then run the handlers' write for this process's share of
    `count` events times `consumers`, each statement its own transaction."""
    probe = Probe()
    probe.t_start = _wait_for_start()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        probe.first_claim = time.monotonic()
        for seq in range(part, count, parts):
            for name in consumers:
                conn.execute(WRITE_SQL, (name, seq % WRITE_KEYS))
                probe.acked += 1
        probe.last_ack = time.monotonic()
    probe.claimed = probe.acked
    return _finished(probe)


# A claimed batch: its lease token (None where there is none) and its rows, the id first.
Batch = tuple[uuid.UUID | None, list[tuple[Any, ...]]]


def _claim_and_ack(
    probe: Probe,
    claim: Callable[[], Batch],
    ack: Callable[[uuid.UUID | None, list[int]], int],
) -> None:
    """Claim and ack batches until a claim comes back empty, timing both into `probe`."""
    while True:
        started = time.monotonic()
        if probe.first_claim is None:
            probe.first_claim = started
        token, rows = claim()
        if not rows:
            return
        claimed_at = time.monotonic()
        probe.claim_s += claimed_at - started
        probe.claims += 1
        probe.claimed += len(rows)
        acked = ack(token, [row[0] for row in rows])
        probe.last_ack = time.monotonic()
        probe.ack_s += probe.last_ack - claimed_at
        probe.acked += acked


def _finished(probe: Probe) -> Probe:
    probe.t_end = time.monotonic()
    probe.peak_rss_mb = peak_rss_mb()
    return probe


def peak_rss_mb() -> float:
    """The peak resident set size of this process so far, MiB: `VmHWM` of /proc/self/status.

    Not getrusage's ru_maxrss: Linux carries that over exec from the forking parent (the
    benchmark, with its data loaded), so every worker would report at least the parent's size.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    drain = sub.add_parser("drain", help="run manage.py drain_events after the start signal")
    drain.add_argument(
        "command_args", nargs=argparse.REMAINDER, help="arguments for drain_events (after --)"
    )
    bus = sub.add_parser("bus", help="the bus's claim.sql and ack.sql in a bare psycopg loop")
    bus.add_argument("--conninfo", required=True)
    bus.add_argument("--batch-size", type=int, required=True)
    bus.add_argument("--consumer", action="append", required=True, dest="consumers")
    raw = sub.add_parser("raw", help="bare psycopg claim/ack loop on bench_raw_job")
    raw.add_argument("--conninfo", required=True)
    raw.add_argument("--batch-size", type=int, required=True)
    insert = sub.add_parser("insert", help="the write handlers' INSERT in a bare psycopg loop")
    insert.add_argument("--conninfo", required=True)
    insert.add_argument("--count", type=int, required=True, help="events (all processes)")
    insert.add_argument("--part", type=int, required=True)
    insert.add_argument("--parts", type=int, required=True)
    insert.add_argument("--consumer", action="append", required=True, dest="consumers")
    args = parser.parse_args(argv)
    if args.mode == "insert":
        probe = run_insert(args.conninfo, args.count, args.part, args.parts, args.consumers)
    elif args.mode == "drain":
        command_args = [a for a in args.command_args if a != "--"]
        probe = run_drain(command_args)
    elif args.mode == "bus":
        probe = run_bus(args.conninfo, args.batch_size, args.consumers)
    else:
        probe = run_raw(args.conninfo, args.batch_size)
    _emit(asdict(probe))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
