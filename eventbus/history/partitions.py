"""The partitioned bus tables: `event_log`, its deliveries and their attempts by month, optional.

A new install starts unpartitioned (seed 000 §2.3); past ~10M rows `manage.py
partition_event_log` moves the three tables online to PostgreSQL declarative partitioning
(eventbus/history/partition_upgrade.py): one partition per UTC month each, `<table>_pYYYYMM`, the
log by its `created_at`, a delivery and its attempts by their event's (`event_created_at`, set by
every path that writes them). So a month's events, deliveries and attempts sit in three partitions
of that month, which the archive drops together once the month is archived and verified
(eventbus/history/archive.py): nothing of it is deleted row by row. `event-log-partitions` keeps
`EVENTBUS_PARTITIONS_AHEAD` (3) months ready ahead (`ensure_partitions`).

Uniqueness across partitions. A unique index on a partitioned table must include the partition
key, so:
- event_log's primary key is (id, created_at). Ids are UUIDv7 made by the emitter for a new row,
  never reused; the only path that writes an existing id again (the archive's restore) writes it
  with its original `created_at`, which the key catches (ON CONFLICT DO NOTHING);
- the per-organization idempotency key lives in the small unpartitioned `event_log_idempotency`
  table (primary key (organization_id, idempotency_key)), claimed by a BEFORE INSERT trigger on
  event_log in the emitting statement itself: the trigger inserts the key (ON CONFLICT DO
  NOTHING, which waits for a concurrent claimer as a unique index would) and skips the event row
  when another event holds it, so the emit statements' `ON CONFLICT DO NOTHING` behaves as it
  does with the unique index. Deleting an event releases its key (AFTER DELETE trigger); dropping
  a partition releases its month's keys explicitly (`release_keys`);
- a delivery's and an attempt's primary key is (id, event_created_at), ids from the table's
  identity (continued from the unpartitioned table's); "one delivery per (event, consumer)",
  `delivery_event_consumer_uniq`, becomes (event_id, consumer, event_created_at), which allows
  no more than the two-column key did, since every delivery of an event carries that event's
  `created_at`. replay.sql names the constraint, so it reads the same on both layouts.

Lookups by id alone (the claim's join to the log, the claim's and the settles' updates by
delivery id) probe each partition's primary key: a few partitions (90 hot days + 3 ahead), the
months ahead empty, so the cost stays O(batch); bench/scale.py measures emit and claim against an
empty database with the same partitions.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone
from psycopg import sql

from eventbus.store.conf import bus_settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Table:
    """A bus table that can be partitioned by month."""

    name: str
    key: str  # the partition key: a timestamp, the event's creation time
    # Storage parameters each partition gets (a partitioned parent holds none): those its
    # unpartitioned table was given by the migrations. `{fillfactor}` is
    # EVENTBUS_PARTITION_FILLFACTOR, read when the partition is made.
    storage: str = ""

    @property
    def partitioned_name(self) -> str:
        """Its partitioned twin's name while the upgrade builds it."""
        return f"{self.name}_partitioned"

    @property
    def unpartitioned_name(self) -> str:
        """The old table's name after the upgrade, until `drop_old`."""
        return f"{self.name}_unpartitioned"

    def partition_name(self, lower: dt.datetime) -> str:
        return f"{self.name}_p{lower:%Y%m}"


# Summary updates (ack, nack) stay on the page: HOT (migration 0011's reasoning).
EVENTS = Table("event_log", "created_at", "fillfactor = {fillfactor}")
# Claims and settles move rows between partial indexes: vacuumed early (migration 0002).
DELIVERIES = Table(
    "eventbus_delivery",
    "event_created_at",
    "autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02",
)
ATTEMPTS = Table("eventbus_deliveryattempt", "event_created_at")
# In foreign-key order: an event before its deliveries before their attempts.
TABLES = (EVENTS, DELIVERIES, ATTEMPTS)
BY_NAME = {table.name: table for table in TABLES}

TABLE = EVENTS.name
NEW_TABLE = EVENTS.partitioned_name
OLD_TABLE = EVENTS.unpartitioned_name
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


class PartitionError(Exception):
    """The partition layout cannot do what was asked (nothing was changed)."""


@dataclass(frozen=True)
class Partition:
    name: str
    lower: dt.datetime
    upper: dt.datetime


def is_partitioned(table: str = TABLE) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(IS_PARTITIONED_SQL, {"table": table})
        row = cursor.fetchone()
    return bool(row and row[0])


def partitioned_tables() -> list[Table]:
    """The bus tables that are partitioned now (none, the three, or, after an upgrade by an
    earlier version that partitioned the log alone, event_log only)."""
    return [table for table in TABLES if is_partitioned(table.name)]


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


def partition_name(lower: dt.datetime, table: str = TABLE) -> str:
    return BY_NAME[table].partition_name(lower)


def ensure_partitions(*, now: dt.datetime | None = None, ahead: int | None = None) -> list[str]:
    """Create the missing monthly partitions of every partitioned table from this month to
    `ahead` months after it. Returns the names created (none on an unpartitioned install)."""
    ahead = bus_settings.PARTITIONS_AHEAD if ahead is None else ahead
    first = month_start(now or timezone.now())
    return ensure_months(first, add_months(first, ahead + 1))


def ensure_months(start: dt.datetime, end: dt.datetime) -> list[str]:
    """Create every missing month partition of [month of `start`, `end`) of every partitioned
    table (a restore brings a dropped month back this way)."""
    created = []
    for table in partitioned_tables():
        created += ensure_range(start, end, table=table, parent=table.name)
    return created


def ensure_range(
    start: dt.datetime, end: dt.datetime, *, table: Table = EVENTS, parent: str | None = None
) -> list[str]:
    """Create every missing month partition of `table` in [month of `start`, `end`), attached to
    `parent` (the table itself, or its partitioned twin during the upgrade)."""
    parent = parent or table.name
    existing = {p.lower for p in partitions(parent)}
    created = []
    lower = month_start(start)
    while lower < end:
        if lower not in existing:
            created.append(_create_partition(table, parent, lower))
        lower = add_months(lower, 1)
    return created


def _create_partition(table: Table, parent: str, lower: dt.datetime) -> str:
    """Create an empty table, then ATTACH it: attaching takes SHARE UPDATE EXCLUSIVE on the
    parent (emits and claims go on), where CREATE TABLE ... PARTITION OF would take ACCESS
    EXCLUSIVE."""
    name = table.partition_name(lower)
    params = {
        "name": sql.Identifier(name),
        "parent": sql.Identifier(parent),
        "lower": sql.Literal(lower.isoformat()),
        "upper": sql.Literal(add_months(lower, 1).isoformat()),
    }
    storage = table.storage.format(fillfactor=int(bus_settings.PARTITION_FILLFACTOR))
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL lock_timeout = '5s'")
        create = "CREATE TABLE {name} (LIKE {parent} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        cursor.execute(sql.SQL(create + (f" WITH ({storage})" if storage else "")).format(**params))
        copy_access(parent, name)
        cursor.execute(
            sql.SQL(
                "ALTER TABLE {parent} ATTACH PARTITION {name}"
                " FOR VALUES FROM ({lower}) TO ({upper})"
            ).format(**params)
        )
    logger.info("%s: partition %s created", table.name, name)
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


def copy_access(source: str, target: str, *, renames: dict[str, str] | None = None) -> None:
    """Give `target` the row-level security (the tenant wall, core/rls.py), its policies and
    the grants of `source`: LIKE and PARTITION OF copy none of them, and a partition read by its
    own name is not covered by its parent's policies.

    A policy naming tables (the attempts' wall looks up their delivery) names `target` where it
    named `source`, and each table of `renames` by its new name (the upgrade points a new
    table's wall at the other new tables: a policy holds the table it names, not the name)."""
    renames = {source: target, **(renames or {})}
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
                parts.append(sql.SQL("USING ({})").format(sql.SQL(_renamed(using, renames))))
            if check:
                parts.append(sql.SQL("WITH CHECK ({})").format(sql.SQL(_renamed(check, renames))))
            cursor.execute(sql.SQL(" ").join(parts))
    copy_grants(source, target)


def copy_grants(source: str, target: str, *, kind: str = "TABLE") -> None:
    """Grant on `target` (a TABLE or a SEQUENCE) what other roles were granted on `source`."""
    with connection.cursor() as cursor:
        cursor.execute(GRANTS_SQL, {"table": source})
        for privilege, grantee in cursor.fetchall():
            cursor.execute(
                sql.SQL("GRANT {} ON {} {} TO {}").format(
                    sql.SQL(privilege), sql.SQL(kind), sql.Identifier(target), sql.SQL(grantee)
                )
            )


def _renamed(expression: str, renames: dict[str, str]) -> str:
    """`expression` (a policy's deparsed text) with each table name of `renames` replaced."""
    for old, new in renames.items():
        expression = re.sub(rf"\b{re.escape(old)}\b", new, expression)
    return expression


def months_covered_ahead(*, now: dt.datetime | None = None) -> int | None:
    """Whole months after this one with a partition ready in every partitioned table (None:
    unpartitioned; -1: this month itself is missing somewhere)."""
    tables = partitioned_tables()
    if not tables:
        return None
    first = month_start(now or timezone.now())
    return min(_months_ahead(first, {p.lower for p in partitions(t.name)}) for t in tables)


def _months_ahead(first: dt.datetime, lowers: set[dt.datetime]) -> int:
    if first not in lowers:
        return -1
    months = 0
    while add_months(first, months + 1) in lowers:
        months += 1
    return months


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
    """ANALYZE the partitioned tables: autovacuum analyzes each partition but never a parent,
    whose statistics the planner uses for joins and filters over the whole table."""
    for table in partitioned_tables():
        with connection.cursor() as cursor:
            cursor.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table.name)))


def release_keys(start: dt.datetime, end: dt.datetime) -> int:
    """Delete the idempotency keys of events created in [start, end) (a dropped month)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {KEYS_TABLE} WHERE created_at >= %s AND created_at < %s", [start, end]
        )
        return cursor.rowcount


def drop_month(lower: dt.datetime) -> list[str]:
    """Detach and drop the month starting at `lower` from every partitioned table, attempts
    first (they point at deliveries, which point at events). Returns the partitions dropped."""
    dropped = []
    for table in reversed(partitioned_tables()):
        for partition in partitions(table.name):
            if partition.lower == lower:
                drop_partition(partition, table=table.name)
                dropped.append(partition.name)
    return dropped


def drop_partition(partition: Partition, *, table: str = TABLE) -> None:
    """Detach a month's partition and drop it. Outside a transaction the detach is CONCURRENTLY
    (emits and claims go on); inside one it is a plain detach (a brief ACCESS EXCLUSIVE)."""
    concurrently = sql.SQL("" if connection.in_atomic_block else " CONCURRENTLY")
    with connection.cursor() as cursor:
        cursor.execute(
            sql.SQL("ALTER TABLE {table} DETACH PARTITION {name}{concurrently}").format(
                table=sql.Identifier(table),
                name=sql.Identifier(partition.name),
                concurrently=concurrently,
            )
        )
        cursor.execute(sql.SQL("DROP TABLE {name}").format(name=sql.Identifier(partition.name)))
    logger.info("%s: partition %s detached and dropped", table, partition.name)
