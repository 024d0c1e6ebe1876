"""The online upgrade to partitioned bus tables (`manage.py partition_event_log`).

For each of event_log, eventbus_delivery and eventbus_deliveryattempt not yet partitioned
(eventbus/history/partitions.py has the layout): build a partitioned twin beside it, repeat every
change to the old table on the twin (a trigger), copy the old rows in id-ordered batches, check that
none is missing, then swap the names in one short transaction. Emits, claims and settles keep
running; they wait only for the swap. Interrupted, it resumes where it was when run again.
An install whose log an earlier version partitioned alone gets its deliveries and attempts
partitioned the same way.

Rows written before deliveries carried their event's time (migration 0022) have NULL in
`event_created_at`: the copy and the mirror fill it from the event (an attempt's from its
delivery's event), so the old tables are never rewritten.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from psycopg import sql

from eventbus.history.partitions import (
    ATTEMPTS,
    DELIVERIES,
    EVENTS,
    KEYS_TABLE,
    TABLES,
    PartitionError,
    Table,
    add_months,
    copy_access,
    copy_grants,
    ensure_range,
    is_partitioned,
    month_start,
    partitions,
)
from eventbus.store.conf import bus_settings

logger = logging.getLogger(__name__)

# The partition key of a row the old table holds without one (see the module docstring), over
# the copied row `r`; event_log always has its own.
KEY_FILLS = {
    DELIVERIES.name: "(SELECT e.created_at FROM event_log e WHERE e.id = r.event_id)",
    ATTEMPTS.name: (
        "(SELECT coalesce(d.event_created_at, e.created_at) FROM eventbus_delivery d"
        " JOIN event_log e ON e.id = d.event_id WHERE d.id = r.delivery_id)"
    ),
}
FIRST_IDS: dict[str, Any] = {
    EVENTS.name: uuid.UUID(int=0),
    DELIVERIES.name: 0,
    ATTEMPTS.name: 0,
}

KEYS_DDL = """
CREATE TABLE IF NOT EXISTS event_log_idempotency (
    organization_id uuid NOT NULL,
    idempotency_key text NOT NULL,
    event_id uuid NOT NULL,
    created_at timestamptz NOT NULL,  -- the event's: a dropped month releases its keys by it
    PRIMARY KEY (organization_id, idempotency_key)
);
CREATE INDEX IF NOT EXISTS event_log_idempotency_created_idx
    ON event_log_idempotency (created_at);

-- Claim the key of a new event row; skip the row (as ON CONFLICT DO NOTHING) when another event
-- holds it. The same event writing its own key again (a restore, the upgrade's copy) proceeds.
CREATE OR REPLACE FUNCTION event_log_claim_idempotency_key() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_log_idempotency (organization_id, idempotency_key, event_id, created_at)
    VALUES (NEW.organization_id, NEW.idempotency_key, NEW.id, NEW.created_at)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    PERFORM 1 FROM event_log_idempotency
     WHERE organization_id = NEW.organization_id AND idempotency_key = NEW.idempotency_key
       AND event_id = NEW.id;
    IF FOUND THEN
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION event_log_release_idempotency_key() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM event_log_idempotency
     WHERE organization_id = OLD.organization_id AND idempotency_key = OLD.idempotency_key
       AND event_id = OLD.id;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION event_log_truncate_idempotency_keys() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE event_log_idempotency;
    RETURN NULL;
END
$$;
"""

KEY_TRIGGERS_DDL = """
CREATE TRIGGER event_log_idempotency_claim BEFORE INSERT ON {table}
    FOR EACH ROW WHEN (NEW.idempotency_key IS NOT NULL)
    EXECUTE FUNCTION event_log_claim_idempotency_key();
CREATE TRIGGER event_log_idempotency_release AFTER DELETE ON {table}
    FOR EACH ROW WHEN (OLD.idempotency_key IS NOT NULL)
    EXECUTE FUNCTION event_log_release_idempotency_key();
CREATE TRIGGER event_log_idempotency_truncate AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION event_log_truncate_idempotency_keys();
"""

# While the upgrade copies, every change to the old table is repeated on its twin, in the
# changing transaction (so it commits or rolls back with it). A delete finds the copy by id
# alone: the old row's key may be the NULL the copy filled.
MIRROR_DDL = """
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM {new} WHERE id = OLD.id;
        RETURN NULL;
    END IF;
    INSERT INTO {new} ({columns}) SELECT {values} FROM (SELECT (NEW).*) r
    ON CONFLICT (id, {key}) DO UPDATE SET {assignments};
    RETURN NULL;
END
$$;
CREATE TRIGGER {trigger} AFTER INSERT OR UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION {function}();
"""

# One batch of the copy, in id order after the last id copied. FOR KEY SHARE: a concurrent
# delete of a row being copied waits for the batch to commit (then its mirror deletes the copy),
# so no deleted row comes back; updates (claims, settles) are not blocked, and the mirror's
# upsert wins either way.
COPY_BATCH_SQL = """
WITH batch AS MATERIALIZED (
    SELECT * FROM {table} WHERE id > %(after)s ORDER BY id LIMIT %(limit)s FOR KEY SHARE
), copied AS (
    INSERT INTO {new} ({columns}) SELECT {values} FROM batch r ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT id FROM batch ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM batch),
       (SELECT count(*) FROM copied)
"""

# Rows of the old table its twin lacks (after the copy, with the mirror on: must be none).
MISSING_SQL = """
SELECT count(*) FROM {table} o WHERE NOT EXISTS (SELECT 1 FROM {new} n WHERE n.id = o.id)
"""

# A table's indexes: name, definition, primary key?, the constraint it backs ('u', 'p' or
# NULL), its columns.
INDEXES_SQL = """
SELECT i.relname, pg_get_indexdef(x.indexrelid), x.indisprimary, con.contype::text,
       ARRAY(SELECT a.attname::text
               FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)
               JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
              ORDER BY k.n)
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
  LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = x.indrelid
 WHERE x.indrelid = to_regclass(%(table)s)
 ORDER BY i.relname
"""

COLUMNS_SQL = """
SELECT attname FROM pg_attribute
 WHERE attrelid = to_regclass(%(table)s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum
"""

# The twin's identity continues where the old table's stopped (the mirror copied the old ids).
CONTINUE_IDENTITY_SQL = """
SELECT setval(pg_get_serial_sequence(%(new)s, 'id'),
              greatest(coalesce(pg_sequence_last_value(
                                    pg_get_serial_sequence(%(old)s, 'id')::regclass), 0),
                       coalesce((SELECT max(id) FROM {new}), 0)) + 1,
              false)
"""


@dataclass
class UpgradeReport:
    copied: int = 0  # rows the batches copied (rows the mirror wrote first are not counted)
    batches: int = 0
    partitions: int = 0
    seconds: float = 0.0
    tables: list[str] = field(default_factory=list)  # the tables this run partitioned
    table: str = ""  # the one being copied now (for progress)


def upgrade(
    *,
    batch: int = 5000,
    now: dt.datetime | None = None,
    ahead: int | None = None,
    progress: Callable[[UpgradeReport], None] | None = None,
    lock_timeout_ms: int = 2000,
    tables: Sequence[Table] = TABLES,
) -> UpgradeReport:
    """Move the unpartitioned bus tables to monthly partitions online.

    `tables` limits the upgrade to some of them: `(EVENTS,)` partitions the log alone, as
    versions before migration 0022 did (the deliveries and attempts then follow in a later run).

    1. For each table not yet partitioned, create its partitioned twin (same columns, checks,
       indexes, row-level security and grants; the partition key in the primary key and in
       the unique constraints; for event_log the idempotency key table and triggers) with its
       partitions, and a trigger on the old table that repeats every change on the twin.
    2. Table by table (the log, the deliveries, the attempts): copy the rows in id-ordered
       batches, each its own short transaction; check that none is missing; then in one short
       transaction (ACCESS EXCLUSIVE on the table and its twin, waiting at most
       `lock_timeout_ms` each try) drop the mirror and rename the tables and indexes so the
       twin has the old names. The old tables stay as `<table>_unpartitioned` until
       `drop_old()`.

    One swap per table, never several at once: emits lock the log before the deliveries, and
    settles the deliveries before the log, so a swap holding both could deadlock with either;
    a table and its twin are only ever taken in that order (the twin by the mirror).
    """
    if connection.in_atomic_block:
        raise PartitionError("the upgrade runs its own transactions: call it outside one")
    todo = [table for table in tables if not is_partitioned(table.name)]
    if not todo:
        raise PartitionError(f"{', '.join(t.name for t in tables)}: already partitioned")
    if EVENTS not in todo and not is_partitioned(EVENTS.name):
        raise PartitionError("partition event_log first (or with its deliveries)")
    started = time.monotonic()
    report = UpgradeReport(tables=[table.name for table in todo])
    ahead = bus_settings.PARTITIONS_AHEAD if ahead is None else ahead
    report.partitions = _prepare(todo, now or timezone.now(), ahead)
    for table in todo:
        _copy(table, batch, report, progress)
        _check_complete(table)
        _swap(table, lock_timeout_ms)
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table.name)))
    report.seconds = time.monotonic() - started
    return report


def _prepare(todo: list[Table], now: dt.datetime, ahead: int) -> int:
    """Step 1 (idempotent: an interrupted upgrade resumes). Returns the partitions created.

    One transaction per table: the mirror's CREATE TRIGGER locks its table against writes until
    commit, and a settle holding the deliveries would wait for a log locked so while this waited
    for the deliveries (a deadlock)."""
    renames = {table.name: table.partitioned_name for table in todo}
    first = _first_month(now)
    end = add_months(month_start(now), ahead + 1)
    created = 0
    for table in todo:
        with transaction.atomic():
            if not _exists(table.partitioned_name):
                _create_twin(table, renames)
            created += len(ensure_range(first, end, table=table, parent=table.partitioned_name))
            _create_mirror(table)
    return created


def _first_month(now: dt.datetime) -> dt.datetime:
    """The oldest month any row can belong to: the oldest event's (a delivery and its attempts
    carry their event's time), or the oldest partition of a log already partitioned."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT min(created_at) FROM {EVENTS.name}")
        oldest = cursor.fetchone()[0] or now
    if is_partitioned(EVENTS.name):
        oldest = min([oldest, *(p.lower for p in partitions(EVENTS.name))])
    return month_start(min(oldest, now))


def _exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        return bool(cursor.fetchone()[0])


def _create_twin(table: Table, renames: dict[str, str]) -> None:
    new = table.partitioned_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {new} (LIKE {table.name} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
            " INCLUDING STORAGE INCLUDING COMMENTS INCLUDING IDENTITY)"
            f" PARTITION BY RANGE ({table.key})"
        )
        cursor.execute(f"ALTER TABLE {new} ALTER COLUMN {table.key} SET NOT NULL")
        cursor.execute(f"ALTER TABLE {new} ADD CONSTRAINT {new}_pkey PRIMARY KEY (id, {table.key})")
        cursor.execute(INDEXES_SQL, {"table": table.name})
        for name, definition, primary, constraint, columns in cursor.fetchall():
            if primary:
                continue
            if constraint == "u":  # a constraint others name (replay.sql): with the key in it
                keyed = ", ".join([*columns, table.key])
                cursor.execute(f"ALTER TABLE {new} ADD CONSTRAINT {_temp(name)} UNIQUE ({keyed})")
            else:
                cursor.execute(_partitioned_index(table, name, definition))
        if table is EVENTS:
            cursor.execute(KEYS_DDL)
            cursor.execute(KEY_TRIGGERS_DDL.format(table=new))
    copy_access(table.name, new, renames=renames)
    if table is EVENTS:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT NOT relrowsecurity FROM pg_class WHERE oid = %s::regclass", [KEYS_TABLE]
            )
            if cursor.fetchone()[0]:  # its rows carry organization_id: the same wall
                copy_access(EVENTS.name, KEYS_TABLE)
    _copy_sequence_grants(table)


def _copy_sequence_grants(table: Table) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_serial_sequence(%s, 'id'), pg_get_serial_sequence(%s, 'id')",
            [table.name, table.partitioned_name],
        )
        old, new = cursor.fetchone()
    if old and new:
        copy_grants(old, new.split(".")[-1], kind="SEQUENCE")


def _partitioned_index(table: Table, name: str, definition: str) -> str:
    """The old table's index, on the twin under a temporary name. A unique index that backs no
    constraint (event_log's idempotency key) becomes a plain one: the key table holds
    uniqueness, and lookups still use the index."""
    head, _, tail = definition.partition(f" ON public.{table.name} ")
    head = head.replace("CREATE UNIQUE INDEX", "CREATE INDEX")
    return f"{head.replace(name, _temp(name))} ON public.{table.partitioned_name} {tail}"


def _columns(table: Table) -> tuple[str, str]:
    """The column list, and the values the copy and the mirror insert from a row `r`."""
    with connection.cursor() as cursor:
        cursor.execute(COLUMNS_SQL, {"table": table.name})
        columns = [row[0] for row in cursor.fetchall()]
    fill = KEY_FILLS.get(table.name)
    values = [f"coalesce(r.{c}, {fill})" if c == table.key and fill else f"r.{c}" for c in columns]
    return ", ".join(columns), ", ".join(values)


def _create_mirror(table: Table) -> None:
    columns, values = _columns(table)
    assignments = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns.split(", "))
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TRIGGER IF EXISTS {_mirror(table)} ON {table.name}")
        cursor.execute(
            MIRROR_DDL.format(
                function=f"{_mirror(table)}_to_partitioned",
                trigger=_mirror(table),
                table=table.name,
                new=table.partitioned_name,
                key=table.key,
                columns=columns,
                values=values,
                assignments=assignments,
            )
        )


def _mirror(table: Table) -> str:
    return f"{table.name}_mirror"


def _copy(
    table: Table,
    batch: int,
    report: UpgradeReport,
    progress: Callable[[UpgradeReport], None] | None,
) -> None:
    columns, values = _columns(table)
    statement = COPY_BATCH_SQL.format(
        table=table.name, new=table.partitioned_name, columns=columns, values=values
    )
    report.table = table.name
    after = FIRST_IDS[table.name]
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, {"after": after, "limit": batch})
            last, seen, copied = cursor.fetchone()
        if not seen:
            return
        after = last
        report.batches += 1
        report.copied += copied
        if progress:
            progress(report)


def _check_complete(table: Table) -> None:
    with connection.cursor() as cursor:
        cursor.execute(MISSING_SQL.format(table=table.name, new=table.partitioned_name))
        missing = cursor.fetchone()[0]
    if missing:
        raise PartitionError(
            f"{missing} rows of {table.name} were not copied; run the upgrade again"
        )


def _swap(table: Table, lock_timeout_ms: int) -> None:
    for _ in range(50):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
                cursor.execute(
                    f"LOCK TABLE {table.name}, {table.partitioned_name} IN ACCESS EXCLUSIVE MODE"
                )
                _rename(cursor, table)
            return
        except Exception as exc:  # lock_timeout: emits held the table; try again shortly
            if "lock timeout" not in str(exc):
                raise
            logger.info("partition upgrade: %s is busy; retrying the swap", table.name)
    raise PartitionError(f"could not take {table.name} for the final rename; run the upgrade again")


def _rename(cursor: Any, table: Table) -> None:
    """Under the swap's locks: the mirror goes, the old table and its indexes take the
    `_unpartitioned` names, the twin and its indexes the table's own."""
    new, old = table.partitioned_name, table.unpartitioned_name
    cursor.execute(f"DROP TRIGGER {_mirror(table)} ON {table.name}")
    cursor.execute(f"DROP FUNCTION {_mirror(table)}_to_partitioned()")
    if _has_identity(cursor, table):
        cursor.execute(CONTINUE_IDENTITY_SQL.format(new=new), {"new": new, "old": table.name})
    cursor.execute(INDEXES_SQL, {"table": table.name})
    old_indexes = [row[0] for row in cursor.fetchall()]
    cursor.execute(f"ALTER TABLE {table.name} RENAME TO {old}")
    for name in old_indexes:
        cursor.execute(f"ALTER INDEX {name} RENAME TO {_old(name)}")
    cursor.execute(f"ALTER TABLE {new} RENAME TO {table.name}")
    for name in old_indexes:
        source = f"{new}_pkey" if name == f"{table.name}_pkey" else _temp(name)
        cursor.execute(f"ALTER INDEX {source} RENAME TO {name}")


def _has_identity(cursor: Any, table: Table) -> bool:
    cursor.execute("SELECT pg_get_serial_sequence(%s, 'id') IS NOT NULL", [table.name])
    return bool(cursor.fetchone()[0])


def _temp(name: str) -> str:
    return f"{name[:55]}_p"


def _old(name: str) -> str:
    return f"{name[:50]}_unpart"


def drop_old() -> list[str]:
    """Drop the unpartitioned tables the upgrade kept (once the partitioned ones are checked).
    Returns the tables dropped."""
    with connection.cursor() as cursor:
        olds = [t.unpartitioned_name for t in reversed(TABLES)]
        cursor.execute(
            "SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL", [olds]
        )
        present = [row[0] for row in cursor.fetchall()]
        if present:  # together: the old attempts' wall names the old deliveries
            cursor.execute(
                sql.SQL("DROP TABLE {}").format(sql.SQL(", ").join(map(sql.Identifier, present)))
            )
    return present
