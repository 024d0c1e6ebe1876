"""Distinct values of an indexed column (entity kinds, consumers, error classes), at any size.

The console's filters and the status page list them; the event log holds millions of rows, so each
list is read by a loose index scan: one index probe per distinct value instead of every row.
"""

from __future__ import annotations

from core.replica.routing import read_connection

CHOICES_LIMIT = 200

# DISTINCT over the leading column of an index by a loose index scan: one index probe per
# distinct value instead of reading every row. Table, column and condition come from
# DISTINCT_COLUMNS only (never from input); the condition matches the index's partial predicate.
LOOSE_SCAN_SQL = """
WITH RECURSIVE found(value) AS (
    (SELECT {column} FROM {table} WHERE {condition} ORDER BY {column} LIMIT 1)
    UNION ALL
    SELECT (SELECT t.{column} FROM {table} t WHERE {condition} AND t.{column} > f.value
             ORDER BY t.{column} LIMIT 1)
      FROM found f WHERE f.value IS NOT NULL
)
SELECT value FROM found WHERE value IS NOT NULL LIMIT %(limit)s
"""
DISTINCT_COLUMNS = {
    "entity_kind": ("event_log", "entity_kind", "TRUE"),  # event_log_entity_idx
    "done_consumer": ("eventbus_delivery", "consumer", "status = 'done'"),  # ..._consumer_done_idx
    "dead_consumer": ("eventbus_delivery", "consumer", "status = 'dead'"),  # delivery_dead_idx
    "dead_error_class": ("eventbus_delivery", "error_class", "status = 'dead'"),  # ..._error_idx
    "dead_event_type": ("eventbus_delivery", "event_type", "status = 'dead'"),  # _group_idx
    "dead_organization": ("eventbus_delivery", "organization_id", "status = 'dead'"),  # _org_idx
}


def distinct_values(name: str, *, limit: int = CHOICES_LIMIT) -> list[str]:
    """Distinct entity kinds, consumers or dead consumers, by a loose index scan (any size)."""
    table, column, condition = DISTINCT_COLUMNS[name]
    sql = LOOSE_SCAN_SQL.format(table=table, column=column, condition=condition)
    with read_connection().cursor() as cursor:
        cursor.execute(sql, {"limit": limit})
        return [row[0] for row in cursor.fetchall()]
