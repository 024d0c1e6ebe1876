"""Raw-SQL baselines for bench/drain.py's emit figures: bare psycopg, same server, same run.

- `single_row_loop`: one single-row INSERT per event into the plain `bench_raw_job` table, all in
  one transaction (about 12,400 INSERTs/s on the reference machine); the baseline of target 1
  (`emit()` in a transaction).
- `event_rows_loop`: the rows `emit()` writes (one event_log row + one eventbus_delivery row per
  consumer) in one statement per event, one transaction: what the real tables and their indexes
  cost, without the bus (no tenant lock, no routes, no validation). For reference.
- `event_rows_bulk`: the same event and delivery rows as `emit_many`, as two multi-row INSERTs
  (`unnest` of binary arrays) per chunk, one transaction per chunk; the baseline of target 2.

Each serialises the payloads with `json.dumps` inside the clock, as any client must; ids
(UUIDv7, as emit's) and entity ids are made before it. A plain psycopg connection with its
defaults (statements prepared after 5 executions), autocommit, so `transaction()` is a BEGIN.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import psycopg

from eventbus.store.ids import uuid7

Item = dict[str, Any]

SINGLE_ROW_SQL = (
    "INSERT INTO bench_raw_job (status, payload, next_at) VALUES ('pending', %s::jsonb, now())"
)

EVENT_COLUMNS = (
    "id, organization_id, event_type, entity_kind, entity_id, payload, metadata, consumed_by, "
    "attempts, status, fanout, idempotency_key, created_at, updated_at"
)
DELIVERY_COLUMNS = (
    "event_id, organization_id, consumer, event_type, status, attempts, max_attempts, "
    "next_attempt_at, created_at, updated_at, event_created_at"
)

# One event and its deliveries, one statement (what emit_insert_one writes, nothing else).
EVENT_ROWS_SQL = f"""
WITH ev AS (
    INSERT INTO event_log ({EVENT_COLUMNS})
    VALUES (%(id)s, %(org)s, %(event_type)s, %(entity_kind)s, %(entity_id)s, %(payload)s::jsonb,
            %(metadata)s::jsonb, '{{}}', 0, 'pending', %(fanout)s, NULL, now(), now())
    RETURNING id
)
INSERT INTO eventbus_delivery ({DELIVERY_COLUMNS})
SELECT ev.id, %(org)s, c, %(event_type)s, 'pending', 0, 8, now(), now(), now(), now()
  FROM ev, unnest(%(consumers)s::text[]) c
"""

BULK_EVENTS_SQL = f"""
INSERT INTO event_log ({EVENT_COLUMNS})
SELECT t.id, %(org)s, %(event_type)s, t.entity_kind, t.entity_id, t.payload::jsonb,
       %(metadata)s::jsonb, '{{}}', 0, 'pending', %(fanout)s, NULL, now(), now()
  FROM unnest(%(ids)b::uuid[], %(entity_kinds)b::text[], %(entity_ids)b::uuid[],
              %(payloads)b::text[]) AS t(id, entity_kind, entity_id, payload)
"""

BULK_DELIVERIES_SQL = f"""
INSERT INTO eventbus_delivery ({DELIVERY_COLUMNS})
SELECT e, %(org)s, c, %(event_type)s, 'pending', 0, 8, now(), now(), now(), now()
  FROM unnest(%(ids)b::uuid[]) e CROSS JOIN unnest(%(consumers)b::text[]) c
"""

METADATA = json.dumps({"schema_version": 1, "emitted_at": "2026-01-01T00:00:00+00:00"})


def _connect(conninfo: str) -> psycopg.Connection[Any]:
    return psycopg.connect(conninfo, autocommit=True, options="-c app.rls_bypass=on")


def single_row_loop(conninfo: str, batch: Sequence[Item]) -> float:
    """Seconds for one INSERT per item into bench_raw_job, one transaction, commit included."""
    with _connect(conninfo) as conn:
        cursor = conn.cursor()
        started = time.perf_counter()
        with conn.transaction():
            for item in batch:
                cursor.execute(SINGLE_ROW_SQL, (json.dumps(item["payload"]),))
        return time.perf_counter() - started


def event_rows_loop(
    conninfo: str, org_id: uuid.UUID, batch: Sequence[Item], consumers: Sequence[str]
) -> float:
    """Seconds for one statement per item writing its event and delivery rows, one transaction."""
    ids = [uuid7() for _ in batch]
    with _connect(conninfo) as conn:
        cursor = conn.cursor()
        started = time.perf_counter()
        with conn.transaction():
            for event_id, item in zip(ids, batch, strict=True):
                cursor.execute(
                    EVENT_ROWS_SQL,
                    {
                        "id": event_id,
                        "org": org_id,
                        "event_type": item["event_type"],
                        "entity_kind": item["entity_kind"],
                        "entity_id": item["entity_id"],
                        "payload": json.dumps(item["payload"]),
                        "metadata": METADATA,
                        "fanout": len(consumers),
                        "consumers": list(consumers),
                    },
                )
        return time.perf_counter() - started


def event_rows_bulk(
    conninfo: str, org_id: uuid.UUID, batch: Sequence[Item], consumers: Sequence[str], chunk: int
) -> float:
    """Seconds for the event and delivery rows of `batch` as two multi-row INSERTs per chunk of
    `chunk` items, one transaction per chunk (as bench_emit_many's calls)."""
    ids = [uuid7() for _ in batch]
    with _connect(conninfo) as conn:
        cursor = conn.cursor()
        started = time.perf_counter()
        for start in range(0, len(batch), chunk):
            items = batch[start : start + chunk]
            params = {
                "org": org_id,
                "event_type": items[0]["event_type"],
                "metadata": METADATA,
                "fanout": len(consumers),
                "ids": ids[start : start + chunk],
                "entity_kinds": [i["entity_kind"] for i in items],
                "entity_ids": [i["entity_id"] for i in items],
                "payloads": [json.dumps(i["payload"]) for i in items],
                "consumers": list(consumers),
            }
            with conn.transaction():
                cursor.execute(BULK_EVENTS_SQL, params)
                cursor.execute(BULK_DELIVERIES_SQL, params)
        return time.perf_counter() - started
