"""Operations that migrations share. Migrations import them, so their SQL never changes: a new
behaviour is a new function, never an edit of one that shipped.

`tenant_wall(table)` gives a new tenant table (one with an `organization_id`) the row-level
security of core 0008 as core 0013 made it (core.rls): visible and writable only to the row's
organization (`deskcomm_tenant()`: the session's tenant, proven unless its role is the
platform's), or with the bypass on to a member of `deskcomm_platform`; forced for the table's
owner too. `tests/core/test_rls.py` fails for a tenant table without it, and
`tests/core/test_db_roles.py` for a policy any role may lift.

`add_index_online(index, table, definition)` builds an index on a busy table (a bus table, plain
or partitioned) without blocking its writers.

The one change to shipped SQL here: `tenant_wall` first let any session use the bypass or name
any tenant. Before core 0013 has run (a fresh install's earlier migrations) it still writes
that first policy, which 0013 rewrites; after it, the new one at once. A fresh install and an
upgraded one end the same. A migration making a tenant table depends on core 0013.
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import migrations

# One init plan each per statement: the setting and the membership (of the current user: inside
# a SECURITY DEFINER function, its owner), and the proven tenant, read once, not per row.
_BYPASS = (
    "(SELECT current_setting('app.rls_bypass', true) = 'on'"
    " AND pg_has_role('deskcomm_platform', 'MEMBER'))"
)
_TENANT = "(SELECT public.deskcomm_tenant())"
_BY_ORGANIZATION = f"{_BYPASS} OR organization_id = {_TENANT}"
# Core 0008's terms, for a table made before core 0013 (which rewrites its policy).
_SETTABLE = (
    "(SELECT current_setting('app.rls_bypass', true)) = 'on'"
    " OR organization_id = (SELECT nullif(current_setting('app.organization_id', true), '')::uuid)"
)


def tenant_wall(table: str) -> migrations.RunSQL:
    """RunSQL that puts the tenant wall on `table` (and takes it off when reversed)."""
    return migrations.RunSQL(
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
        "DO $$\nBEGIN\n"
        "    IF to_regprocedure('public.deskcomm_tenant()') IS NOT NULL THEN\n"
        f"        CREATE POLICY tenant_wall ON {table} USING ({_BY_ORGANIZATION})"
        f" WITH CHECK ({_BY_ORGANIZATION});\n"
        "    ELSE\n"
        f"        CREATE POLICY tenant_wall ON {table} USING ({_SETTABLE})"
        f" WITH CHECK ({_SETTABLE});\n"
        "    END IF;\nEND\n$$;",
        reverse_sql=(
            f"DROP POLICY tenant_wall ON {table};\n"
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;\n"
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
        ),
    )


def add_index_online(index: str, table: str, definition: str) -> migrations.RunPython:
    """RunPython that builds `CREATE INDEX <index> ON <table> <definition>` without blocking the
    table's writers, on either layout of the bus tables (eventbus.history.partition_upgrade):

    - a plain table: `CREATE INDEX CONCURRENTLY` (emits, claims and settles go on meanwhile);
    - a partitioned one (CONCURRENTLY cannot build on the parent): the parent's index `ON ONLY`
      (invalid until complete), each partition's built CONCURRENTLY and attached; the parent's
      becomes valid with the last, and partitions created later inherit it.

    An index a failed run left invalid (a build past the migration's lock timeout) is dropped and
    built again; a valid one is kept, so the operation can be repeated. The migration using it
    must be `atomic = False`, and pair it with the model's AddIndex as state only
    (SeparateDatabaseAndState). Reversed: `DROP INDEX` of the index (and its partitions').
    """

    def build(apps: object, schema_editor: Any) -> None:
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [table])
            row = cursor.fetchone()
            if row is None:
                raise RuntimeError(f"add_index_online: no table {table}")
            if row[0] != "p":
                _build_concurrently(cursor, index, table, definition)
                return
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {index} ON ONLY {table} {definition}")
            cursor.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
                " WHERE i.inhparent = to_regclass(%s) ORDER BY c.relname",
                [table],
            )
            for (partition,) in cursor.fetchall():
                own = _partition_index_name(index, partition)
                _build_concurrently(cursor, own, partition, definition)
                cursor.execute(
                    "SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass(%s)"
                    " AND inhparent = to_regclass(%s)",
                    [own, index],
                )
                if cursor.fetchone() is None:
                    cursor.execute(f"ALTER INDEX {index} ATTACH PARTITION {own}")

    def drop(apps: object, schema_editor: Any) -> None:
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(f"DROP INDEX IF EXISTS {index}")  # a parent's takes its partitions'

    return migrations.RunPython(build, drop)


def _build_concurrently(cursor: Any, index: str, table: str, definition: str) -> None:
    cursor.execute(
        "SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", [index]
    )
    row = cursor.fetchone()
    if row is not None and row[0]:
        return
    if row is not None:  # left invalid by a failed build
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
    cursor.execute(f"CREATE INDEX CONCURRENTLY {index} ON {table} {definition}")


def _partition_index_name(index: str, partition: str) -> str:
    """A partition's own index name: the partition's name and the index's, within 63 bytes."""
    name = f"{partition}_{index}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:54]}_{digest}"
