"""The partitioned event log: `event_log` by month of `created_at` (seed 000 §2.3), optional.

A new install starts unpartitioned; past ~10M rows `manage.py partition_event_log` moves the log
online to PostgreSQL declarative partitioning (`upgrade`): one partition per UTC month,
`event_log_pYYYYMM`, covering the oldest event's month up to `EVENTBUS_PARTITIONS_AHEAD` months
ahead (3), kept ahead by the `event-log-partitions` job (`ensure_partitions`). The archive then
drops a whole month's partition once it is archived and verified (eventbus/archive.py).

Uniqueness across partitions. A unique index on a partitioned table must include the partition
key, so:
- the primary key is (id, created_at). Ids are UUIDv7 made by the emitter for a new row, never
  reused; the only path that writes an existing id again (the archive's restore) writes it with
  its original `created_at`, which the key catches (ON CONFLICT DO NOTHING);
- the per-organization idempotency key lives in the small unpartitioned `event_log_idempotency`
  table (primary key (organization_id, idempotency_key)), claimed by a BEFORE INSERT trigger on
  event_log in the emitting statement itself: the trigger inserts the key (ON CONFLICT DO
  NOTHING, which waits for a concurrent claimer as a unique index would) and skips the event row
  when another event holds it, so the emit statements' `ON CONFLICT DO NOTHING` behaves as it
  does with the unique index. Deleting an event releases its key (AFTER DELETE trigger); dropping
  a partition releases its month's keys explicitly (`release_keys`).

Lookups by id alone (the claim's join, ack/nack's summary updates) probe each partition's
primary key: a few partitions (90 hot days + 3 ahead), and the months ahead are empty, so the
cost stays O(batch); bench/scale.py measures it against an empty database.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone
from psycopg import sql

from eventbus.conf import bus_settings

logger = logging.getLogger(__name__)

TABLE = "event_log"
NEW_TABLE = "event_log_partitioned"  # during the upgrade
OLD_TABLE = "event_log_unpartitioned"  # the upgrade keeps the old table until --drop-old
KEYS_TABLE = "event_log_idempotency"

IS_PARTITIONED_SQL = """
SELECT c.relkind = 'p' FROM pg_class c
 WHERE c.oid = to_regclass(%(table)s)
"""

# The monthly partitions, oldest first, with their bounds (from the catalog, not their names).
PARTITIONS_SQL = """
SELECT c.relname,
       (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                     'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)'))[1]::timestamptz AS lower,
       (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                     'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)'))[2]::timestamptz AS upper
  FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
 WHERE i.inhparent = to_regclass(%(table)s)
 ORDER BY 2
"""

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

# While the upgrade copies, every change to the old table is repeated on the new one (in the
# changing transaction, so it commits or rolls back with it).
MIRROR_DDL = """
CREATE OR REPLACE FUNCTION event_log_mirror_to_partitioned() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM event_log_partitioned WHERE id = OLD.id AND created_at = OLD.created_at;
        RETURN NULL;
    END IF;
    INSERT INTO event_log_partitioned SELECT (NEW).*
    ON CONFLICT (id, created_at) DO UPDATE SET {assignments};
    RETURN NULL;
END
$$;
CREATE TRIGGER event_log_mirror AFTER INSERT OR UPDATE OR DELETE ON event_log
    FOR EACH ROW EXECUTE FUNCTION event_log_mirror_to_partitioned();
"""

# One batch of the copy, in id order after the last id copied. FOR KEY SHARE: a concurrent
# delete of a row being copied waits for the batch to commit (then its mirror deletes the copy),
# so no deleted row comes back; updates are not blocked (the mirror's upsert wins either way).
COPY_BATCH_SQL = """
WITH batch AS MATERIALIZED (
    SELECT * FROM event_log WHERE id > %(after)s ORDER BY id LIMIT %(limit)s FOR KEY SHARE
), copied AS (
    INSERT INTO event_log_partitioned SELECT * FROM batch ON CONFLICT DO NOTHING RETURNING 1
)
SELECT (SELECT id FROM batch ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM batch),
       (SELECT count(*) FROM copied)
"""

# Rows of the old table the new one lacks (after the copy, with the mirror on: must be none).
MISSING_SQL = """
SELECT count(*) FROM event_log o
 WHERE NOT EXISTS (SELECT 1 FROM event_log_partitioned n
                    WHERE n.id = o.id AND n.created_at = o.created_at)
"""

INDEXES_SQL = """
SELECT i.relname, pg_get_indexdef(x.indexrelid), x.indisprimary
  FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
 WHERE x.indrelid = to_regclass(%(table)s)
 ORDER BY i.relname
"""

COLUMNS_SQL = """
SELECT attname FROM pg_attribute
 WHERE attrelid = 'event_log'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum
"""


class PartitionError(Exception):
    """The partition layout cannot do what was asked (nothing was changed)."""


@dataclass(frozen=True)
class Partition:
    name: str
    lower: dt.datetime
    upper: dt.datetime


@dataclass
class UpgradeReport:
    copied: int = 0  # rows the batches copied (rows the mirror wrote first are not counted)
    batches: int = 0
    partitions: int = 0
    seconds: float = 0.0


def is_partitioned() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(IS_PARTITIONED_SQL, {"table": TABLE})
        row = cursor.fetchone()
    return bool(row and row[0])


def partitions(table: str = TABLE) -> list[Partition]:
    with connection.cursor() as cursor:
        cursor.execute(PARTITIONS_SQL, {"table": table})
        return [Partition(name, lower, upper) for name, lower, upper in cursor.fetchall()]


def month_start(moment: dt.datetime) -> dt.datetime:
    moment = moment.astimezone(dt.UTC)
    return dt.datetime(moment.year, moment.month, 1, tzinfo=dt.UTC)


def add_months(start: dt.datetime, months: int) -> dt.datetime:
    index = start.year * 12 + start.month - 1 + months
    return dt.datetime(index // 12, index % 12 + 1, 1, tzinfo=dt.UTC)


def partition_name(lower: dt.datetime) -> str:
    return f"{TABLE}_p{lower:%Y%m}"


def ensure_partitions(
    *, now: dt.datetime | None = None, ahead: int | None = None, table: str = TABLE
) -> list[str]:
    """Create the missing monthly partitions from this month to `ahead` months after it.

    Returns the names created. Nothing to do on an unpartitioned install.
    """
    if table == TABLE and not is_partitioned():
        return []
    ahead = bus_settings.PARTITIONS_AHEAD if ahead is None else ahead
    first = month_start(now or timezone.now())
    return ensure_range(first, add_months(first, ahead + 1), table=table)


def ensure_range(start: dt.datetime, end: dt.datetime, *, table: str = TABLE) -> list[str]:
    """Create every missing month partition of [month of `start`, `end`)."""
    existing = {p.lower for p in partitions(table)}
    created = []
    lower = month_start(start)
    while lower < end:
        if lower not in existing:
            created.append(_create_partition(table, lower))
        lower = add_months(lower, 1)
    return created


def _create_partition(table: str, lower: dt.datetime) -> str:
    """Create an empty table, then ATTACH it: attaching takes SHARE UPDATE EXCLUSIVE on the log
    (emits and claims go on), where CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE."""
    name = partition_name(lower)
    params = {
        "name": sql.Identifier(name),
        "table": sql.Identifier(table),
        "lower": sql.Literal(lower.isoformat()),
        "upper": sql.Literal(add_months(lower, 1).isoformat()),
        "fill": sql.Literal(bus_settings.PARTITION_FILLFACTOR),
    }
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL lock_timeout = '5s'")
        cursor.execute(
            sql.SQL(
                "CREATE TABLE {name} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
                " WITH (fillfactor = {fill})"
            ).format(**params)
        )
        copy_access(table, name)
        cursor.execute(
            sql.SQL(
                "ALTER TABLE {table} ATTACH PARTITION {name} FOR VALUES FROM ({lower}) TO ({upper})"
            ).format(**params)
        )
    logger.info("event log: partition %s created", name)
    return name


ROW_SECURITY_SQL = """
SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = to_regclass(%(table)s)
"""
POLICIES_SQL = """
SELECT policyname, permissive, roles, cmd, qual, with_check FROM pg_policies
 WHERE schemaname = current_schema() AND tablename = %(table)s
"""
GRANTS_SQL = """
SELECT a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
  FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
  LEFT JOIN pg_roles r ON r.oid = a.grantee
 WHERE c.oid = to_regclass(%(table)s) AND a.grantee <> c.relowner
"""


def copy_access(source: str, target: str) -> None:
    """Give `target` the row-level security (the tenant wall, core/rls.py), its policies and
    the grants of `source`: LIKE and PARTITION OF copy none of them, and a partition read by its
    own name is not covered by its parent's policies."""
    with connection.cursor() as cursor:
        cursor.execute(ROW_SECURITY_SQL, {"table": source})
        enabled, forced = cursor.fetchone()
        name = sql.Identifier(target)
        if enabled:
            cursor.execute(sql.SQL("ALTER TABLE {} ENABLE ROW LEVEL SECURITY").format(name))
        if forced:
            cursor.execute(sql.SQL("ALTER TABLE {} FORCE ROW LEVEL SECURITY").format(name))
        cursor.execute(POLICIES_SQL, {"table": source})
        for policy, permissive, roles, command, using, check in cursor.fetchall():
            parts = [
                sql.SQL("CREATE POLICY {} ON {} AS {} FOR {} TO {}").format(
                    sql.Identifier(policy),
                    name,
                    sql.SQL(permissive),
                    sql.SQL(command),
                    sql.SQL(", ").join(
                        sql.SQL(r) if r == "public" else sql.Identifier(r) for r in roles
                    ),
                )
            ]
            if using:
                parts.append(sql.SQL("USING ({})").format(sql.SQL(using)))
            if check:
                parts.append(sql.SQL("WITH CHECK ({})").format(sql.SQL(check)))
            cursor.execute(sql.SQL(" ").join(parts))
        cursor.execute(GRANTS_SQL, {"table": source})
        for privilege, grantee in cursor.fetchall():
            cursor.execute(
                sql.SQL("GRANT {} ON {} TO {}").format(sql.SQL(privilege), name, sql.SQL(grantee))
            )


def months_covered_ahead(*, now: dt.datetime | None = None) -> int | None:
    """Whole months after this one with a partition ready (None: unpartitioned)."""
    if not is_partitioned():
        return None
    first = month_start(now or timezone.now())
    lowers = {p.lower for p in partitions()}
    months = 0
    while add_months(first, months + 1) in lowers:
        months += 1
    return months if first in lowers else -1


def check_partitions_ahead() -> None:
    """Health probe: raises when fewer months are ready ahead than EVENTBUS_PARTITIONS_MIN_AHEAD
    (the `event-log-partitions` job has not run for a while: emits fail past the last one)."""
    ahead = months_covered_ahead()
    if ahead is None:
        return
    wanted = bus_settings.PARTITIONS_MIN_AHEAD
    if ahead < wanted:
        raise PartitionError(
            f"event_log has partitions for {ahead} month(s) after this one (wanted {wanted}): "
            "run the event-log-partitions job (manage.py partition_event_log --ahead)"
        )


def analyze_parent() -> None:
    """ANALYZE the partitioned event_log: autovacuum analyzes each partition but never the
    parent, whose statistics the planner uses for joins and filters over the whole log."""
    if is_partitioned():
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {TABLE}")


def release_keys(start: dt.datetime, end: dt.datetime) -> int:
    """Delete the idempotency keys of events created in [start, end) (a dropped month)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {KEYS_TABLE} WHERE created_at >= %s AND created_at < %s", [start, end]
        )
        return cursor.rowcount


def drop_partition(partition: Partition) -> None:
    """Detach a month's partition and drop it. Outside a transaction the detach is CONCURRENTLY
    (emits and claims go on); inside one it is a plain detach (a brief ACCESS EXCLUSIVE)."""
    concurrently = sql.SQL("" if connection.in_atomic_block else " CONCURRENTLY")
    with connection.cursor() as cursor:
        cursor.execute(
            sql.SQL("ALTER TABLE {table} DETACH PARTITION {name}{concurrently}").format(
                table=sql.Identifier(TABLE),
                name=sql.Identifier(partition.name),
                concurrently=concurrently,
            )
        )
        cursor.execute(sql.SQL("DROP TABLE {name}").format(name=sql.Identifier(partition.name)))
    logger.info("event log: partition %s detached and dropped", partition.name)


# --- The upgrade ------------------------------------------------------------------------------


def upgrade(
    *,
    batch: int = 5000,
    now: dt.datetime | None = None,
    ahead: int | None = None,
    progress: Callable[[UpgradeReport], None] | None = None,
    lock_timeout_ms: int = 2000,
) -> UpgradeReport:
    """Move an unpartitioned event_log to monthly partitions online.

    1. Create `event_log_partitioned` (same columns, checks and indexes; primary key (id,
       created_at); the idempotency key table and triggers) with its partitions, and a trigger on
       event_log that repeats every insert, update and delete on it.
    2. Copy the rows in id-ordered batches, each its own short transaction.
    3. Check that no row is missing, then in one short transaction (ACCESS EXCLUSIVE on both
       tables, waiting at most `lock_timeout_ms` each try) rename the tables and indexes so the
       partitioned one is `event_log`, and drop the mirror. The old table stays as
       `event_log_unpartitioned` until `drop_old()`.

    Emits keep flowing throughout; they wait only for the final rename. Re-running after an
    interruption resumes (the copy skips rows already there).
    """
    if connection.in_atomic_block:
        raise PartitionError("the upgrade runs its own transactions: call it outside one")
    if is_partitioned():
        raise PartitionError("event_log is already partitioned")
    started = time.monotonic()
    report = UpgradeReport()
    ahead = bus_settings.PARTITIONS_AHEAD if ahead is None else ahead
    with transaction.atomic():
        report.partitions = _prepare(now or timezone.now(), ahead)
    after = "00000000-0000-0000-0000-000000000000"
    while True:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(COPY_BATCH_SQL, {"after": after, "limit": batch})
            last, seen, copied = cursor.fetchone()
        if not seen:
            break
        after = last
        report.batches += 1
        report.copied += copied
        if progress:
            progress(report)
    with connection.cursor() as cursor:
        cursor.execute(MISSING_SQL)
        missing = cursor.fetchone()[0]
    if missing:
        raise PartitionError(f"{missing} rows were not copied; run the upgrade again")
    _swap(lock_timeout_ms)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TABLE}")
    report.seconds = time.monotonic() - started
    return report


def _prepare(now: dt.datetime, ahead: int) -> int:
    """Step 1 (idempotent: an interrupted upgrade resumes). Returns the partitions created."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [NEW_TABLE])
        exists = cursor.fetchone()[0]
        cursor.execute(KEYS_DDL)
        if not exists:
            cursor.execute(
                f"CREATE TABLE {NEW_TABLE} (LIKE {TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
                f" INCLUDING STORAGE INCLUDING COMMENTS) PARTITION BY RANGE (created_at)"
            )
            cursor.execute(
                f"ALTER TABLE {NEW_TABLE} ADD CONSTRAINT {NEW_TABLE}_pkey"
                " PRIMARY KEY (id, created_at)"
            )
            cursor.execute(INDEXES_SQL, {"table": TABLE})
            for name, definition, primary in cursor.fetchall():
                if not primary:
                    cursor.execute(_partitioned_index(name, definition))
            cursor.execute(KEY_TRIGGERS_DDL.format(table=NEW_TABLE))
            copy_access(TABLE, NEW_TABLE)
            cursor.execute(
                "SELECT NOT relrowsecurity FROM pg_class WHERE oid = %s::regclass", [KEYS_TABLE]
            )
            if cursor.fetchone()[0]:  # its rows carry organization_id: the same wall
                copy_access(TABLE, KEYS_TABLE)
        cursor.execute(f"SELECT min(created_at) FROM {TABLE}")
        oldest = cursor.fetchone()[0] or now
    first = month_start(min(oldest, now))
    created = ensure_range(first, add_months(month_start(now), ahead + 1), table=NEW_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(COLUMNS_SQL)
        columns = [row[0] for row in cursor.fetchall()]
        assignments = ", ".join(f"{c} = EXCLUDED.{c}" for c in columns)
        cursor.execute("DROP TRIGGER IF EXISTS event_log_mirror ON event_log")
        cursor.execute(MIRROR_DDL.format(assignments=assignments))
    return len(created)


def _partitioned_index(name: str, definition: str) -> str:
    """The old table's index, on the new table under a temporary name. The unique idempotency
    index becomes a plain one (the key table holds uniqueness; lookups still use this)."""
    head, _, tail = definition.partition(f" ON public.{TABLE} ")
    head = head.replace("CREATE UNIQUE INDEX", "CREATE INDEX")
    return f"{head.replace(name, _temp(name))} ON public.{NEW_TABLE} {tail}"


def _temp(name: str) -> str:
    return f"{name[:55]}_p"


def _swap(lock_timeout_ms: int) -> None:
    for _ in range(50):
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
                cursor.execute(f"LOCK TABLE {TABLE}, {NEW_TABLE} IN ACCESS EXCLUSIVE MODE")
                cursor.execute("DROP TRIGGER event_log_mirror ON event_log")
                cursor.execute("DROP FUNCTION event_log_mirror_to_partitioned()")
                cursor.execute(INDEXES_SQL, {"table": TABLE})
                old_indexes = [row[0] for row in cursor.fetchall()]
                cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD_TABLE}")
                for name in old_indexes:
                    cursor.execute(f"ALTER INDEX {name} RENAME TO {_old(name)}")
                cursor.execute(f"ALTER TABLE {NEW_TABLE} RENAME TO {TABLE}")
                for name in old_indexes:
                    source = f"{NEW_TABLE}_pkey" if name == f"{TABLE}_pkey" else _temp(name)
                    cursor.execute(f"ALTER INDEX {source} RENAME TO {name}")
            return
        except Exception as exc:  # lock_timeout: emits held the table; try again shortly
            if "lock timeout" not in str(exc):
                raise
            logger.info("event log upgrade: the table is busy; retrying the swap")
    raise PartitionError("could not take the table for the final rename; run the upgrade again")


def _old(name: str) -> str:
    return f"{name[:50]}_unpart"


def drop_old() -> None:
    """Drop the unpartitioned table the upgrade kept (once the partitioned log is verified)."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {OLD_TABLE}")
