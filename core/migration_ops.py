"""Operations that migrations share. Migrations import them, so their SQL never changes: a new
behaviour is a new function, never an edit of one that shipped.

`tenant_wall(table)` gives a new tenant table (one with an `organization_id`) the row-level
security of core 0008 (core.rls): visible and writable only with the bypass on or to the row's
organization, forced for the table's owner too. `tests/core/test_rls.py` fails for a tenant
table without it.
"""

from __future__ import annotations

from django.db import migrations

_BYPASS = "(SELECT current_setting('app.rls_bypass', true)) = 'on'"
_TENANT = "(SELECT nullif(current_setting('app.organization_id', true), '')::uuid)"
_BY_ORGANIZATION = f"{_BYPASS} OR organization_id = {_TENANT}"


def tenant_wall(table: str) -> migrations.RunSQL:
    """RunSQL that puts the tenant wall on `table` (and takes it off when reversed)."""
    return migrations.RunSQL(
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"ALTER TABLE {table} FORCE ROW LEVEL SECURITY;\n"
        f"CREATE POLICY tenant_wall ON {table} USING ({_BY_ORGANIZATION}) "
        f"WITH CHECK ({_BY_ORGANIZATION});",
        reverse_sql=(
            f"DROP POLICY tenant_wall ON {table};\n"
            f"ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY;\n"
            f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
        ),
    )
