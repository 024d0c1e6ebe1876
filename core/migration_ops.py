"""Operations that migrations share. Migrations import them, so their SQL never changes: a new
behaviour is a new function, never an edit of one that shipped.

`tenant_wall(table)` gives a new tenant table (one with an `organization_id`) the row-level
security of core 0008 as core 0013 made it (core.rls): visible and writable only to the row's
organization (`deskcomm_tenant()`: the session's tenant, proven unless its role is the
platform's), or with the bypass on to a member of `deskcomm_platform`; forced for the table's
owner too. `tests/core/test_rls.py` fails for a tenant table without it, and
`tests/core/test_db_roles.py` for a policy any role may lift.

The one change to shipped SQL here: `tenant_wall` first let any session use the bypass or name
any tenant. Before core 0013 has run (a fresh install's earlier migrations) it still writes
that first policy, which 0013 rewrites; after it, the new one at once. A fresh install and an
upgraded one end the same. A migration making a tenant table depends on core 0013.
"""

from __future__ import annotations

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
