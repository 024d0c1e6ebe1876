"""The soak benchmark's event type and its three one-write consumers (bench/soak.py).

Loaded only when `EVENTBUS_HANDLER_MODULES=bench.soak_consumers` (bench/soak.py sets it for its
scratch database, its producers and its `drain_events` processes); the product never imports
this module.

`bench.soak` has three consumers, `bench-soak-1-worker` .. `bench-soak-3-worker`. Each handler
does what a small projection does: one autocommit `INSERT ... ON CONFLICT DO UPDATE` through
Django's connection into WRITE_TABLE, keyed by (event id, consumer). The row keeps the event's
creation time and the moment this handler started, so the benchmark reads the pick-up lag from
it, and `runs` counts the runs of that delivery (2 or more: it ran twice).
bench/peers/graphile/tasks/soak_write.js writes the same row for graphile-worker's jobs.

`BENCH_SOAK_HANDLER` (bench/soak.py's `--handler`, read when this module loads) picks how the
same write is declared, the three ways docs/handlers-that-write.md compares: `plain` (default:
the handler's own autocommit), `atomic` (`atomic=True`: the INSERT commits with the ack, a
claim's deliveries grouped in one transaction) or `batch` (`batch=BATCH`: one multi-row upsert
per call, committed with the ack).
"""

from __future__ import annotations

import os

from django.db import connection
from django.utils import timezone

from eventbus.store.catalog import declare
from eventbus.store.event import Event
from eventbus.store.registry import consumer

SOAK_EVENT = "bench.soak"
SOAK_CONSUMERS: tuple[str, ...] = (
    "bench-soak-1-worker",
    "bench-soak-2-worker",
    "bench-soak-3-worker",
)
ENTITY_KIND = "bench_item"
WRITE_TABLE = "bench_soak_write"
HANDLERS = ("plain", "atomic", "batch")
BATCH = 200

# The table both systems write (created by bench/soak.py in each scratch database). The index on
# started_at serves the benchmark's per-window lag query.
CREATE_WRITE_TABLE = f"""
CREATE TABLE {WRITE_TABLE} (
    event_id uuid NOT NULL,
    consumer text NOT NULL,
    organization_id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    started_at timestamptz NOT NULL,
    runs integer NOT NULL,
    PRIMARY KEY (event_id, consumer)
);
CREATE INDEX {WRITE_TABLE}_started ON {WRITE_TABLE} (started_at)
"""

UPSERT = f"""
INSERT INTO {WRITE_TABLE} (event_id, consumer, organization_id, created_at, started_at, runs)
VALUES (%s, %s, %s, %s, %s, 1)
ON CONFLICT (event_id, consumer) DO UPDATE SET runs = {WRITE_TABLE}.runs + 1
"""

declare(SOAK_EVENT, required=("seq",), description="soak benchmark: three one-write consumers")


def write(event: Event) -> None:
    """One autocommit upsert of this delivery's row (its start time, its event's creation)."""
    started = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            UPSERT,
            [event.id, event.consumer, event.organization_id, event.created_at, started],
        )


def write_many(events: list[Event]) -> None:
    """One multi-row upsert for a batch (all of one consumer): every row gets the call's start."""
    started = timezone.now()
    rows = [(e.id, e.consumer, e.organization_id, e.created_at, started) for e in events]
    with connection.cursor() as cursor:
        cursor.executemany(UPSERT, rows)  # psycopg 3 pipelines it: one round trip


HANDLER = os.environ.get("BENCH_SOAK_HANDLER", "plain")
if HANDLER not in HANDLERS:
    raise ValueError(f"BENCH_SOAK_HANDLER must be one of {HANDLERS}, got {HANDLER!r}")
for _name in SOAK_CONSUMERS:
    if HANDLER == "batch":
        consumer(_name, events=[SOAK_EVENT], batch=BATCH)(write_many)
    else:
        consumer(_name, events=[SOAK_EVENT], atomic=HANDLER == "atomic")(write)
