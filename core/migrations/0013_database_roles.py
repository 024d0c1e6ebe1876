"""The wall holds against the application's own roles (issue 38, item 6; core.db_roles, core.rls).

Until now any session could lift the tenant wall with `SET app.rls_bypass = on`, or walk into
another tenant with `SET app.organization_id = '<its id>'`. From here:

1. the group roles: `deskcomm_platform` (whose members may bypass) and `deskcomm_app` (the
   application's privileges on rows), created when missing (which needs CREATEROLE: otherwise
   the migration stops and says what to run), and the migrating role, the tables' owner, made a
   member of deskcomm_platform (migrations and the SECURITY DEFINER functions it owns bypass);
2. deskcomm_app gets SELECT, INSERT, UPDATE, DELETE on every table and USAGE on every sequence
   of the application's schemas, now and (default privileges) for what the owner creates later;
   deskcomm_platform also reads sequences (pg_dump, run by the worker role);
3. the tenant scope needs a proof: `app.organization_id` counts for a role outside
   deskcomm_platform only with `app.tenant_proof` = HMAC-SHA256 of the organization's id under
   a random key in `deskcomm_private.tenant_key`, which only the platform's roles may read.
   `deskcomm_tenant()` is the scope a policy uses (the organization, or NULL);
   `deskcomm_tenant_proof(org)` (the platform's roles only) mints a proof;
4. every policy that reads `app.rls_bypass` is rewritten: the bypass term becomes `(SELECT
   current_setting('app.rls_bypass', true) = 'on' AND pg_has_role('deskcomm_platform',
   'MEMBER'))` and the tenant term `(SELECT deskcomm_tenant())`, each one init plan per
   statement as before. The policies are found in pg_policies (core 0008's, eventbus 0017's,
   every `tenant_wall` of core.migration_ops, partitions); one in a form this migration does not
   know stops it;
5. the API key lookup becomes `deskcomm_api_key_authenticate(prefix, hash, local)`, SECURITY
   DEFINER (it still finds the key for a web role, which cannot bypass), which scopes the
   session (tenant and proof) only for whoever presents the key's hash: knowing a key's public
   prefix scopes nothing. The two earlier signatures are dropped.

A migration that makes a tenant table with `core.migration_ops.tenant_wall` depends on this one.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

from django.db import migrations

GROUPS_SQL = """
DO $$
DECLARE
    v_group text;
BEGIN
    FOREACH v_group IN ARRAY ARRAY['deskcomm_platform', 'deskcomm_app'] LOOP
        CONTINUE WHEN EXISTS (SELECT FROM pg_roles WHERE rolname = v_group);
        BEGIN
            EXECUTE format('CREATE ROLE %I NOLOGIN', v_group);
        EXCEPTION
            WHEN duplicate_object OR unique_violation THEN NULL;  -- a concurrent migrate made it
            WHEN insufficient_privilege THEN
                RAISE EXCEPTION 'the group role % does not exist and % may not create it', v_group,
                                current_user
                      USING HINT = format('As a superuser run: CREATE ROLE deskcomm_platform '
                                          'NOLOGIN; CREATE ROLE deskcomm_app NOLOGIN; GRANT '
                                          'deskcomm_platform TO %I; then migrate again (README '
                                          '"Database roles").', current_user);
        END;
    END LOOP;
    IF NOT pg_has_role('deskcomm_platform', 'MEMBER') THEN
        BEGIN
            EXECUTE format('GRANT deskcomm_platform TO %I', current_user);
        EXCEPTION WHEN insufficient_privilege OR invalid_grant_operation THEN
            RAISE EXCEPTION 'the owner % must be a member of deskcomm_platform (its migrations '
                            'and SECURITY DEFINER functions bypass the tenant wall)', current_user
                  USING HINT = format('As a superuser run: GRANT deskcomm_platform TO %I; then '
                                      'migrate again.', current_user);
        END;
    END IF;
END
$$;
"""

# Schemas of the application: Django's tables, and the job broker's queue (core 0006).
SCHEMAS = ("public", "dramatiq")


def _each_schema(*statements: str) -> str:
    return "\n".join(sql.format(schema=schema) for schema in SCHEMAS for sql in statements)


GRANTS_SQL = (
    _each_schema(
        "GRANT USAGE ON SCHEMA {schema} TO deskcomm_app;",
        "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO deskcomm_app;",
        "GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO deskcomm_app;",
        "GRANT SELECT ON ALL SEQUENCES IN SCHEMA {schema} TO deskcomm_platform;",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema}"
        " GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO deskcomm_app;",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT USAGE ON SEQUENCES TO deskcomm_app;",
        "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT SELECT ON SEQUENCES TO deskcomm_platform;",
    )
    + """
-- PostgreSQL 15 gives PUBLIC no CREATE on `public`; a database upgraded from before may.
DO $$
BEGIN
    REVOKE CREATE ON SCHEMA public FROM PUBLIC;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'could not revoke CREATE on schema public from PUBLIC (not its owner)';
END
$$;
"""
)
REVOKE_GRANTS_SQL = _each_schema(
    "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} REVOKE ALL ON TABLES FROM deskcomm_app;",
    "ALTER DEFAULT PRIVILEGES IN SCHEMA {schema}"
    " REVOKE ALL ON SEQUENCES FROM deskcomm_app, deskcomm_platform;",
    "REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM deskcomm_app;",
    "REVOKE ALL ON ALL SEQUENCES IN SCHEMA {schema} FROM deskcomm_app, deskcomm_platform;",
    "REVOKE USAGE ON SCHEMA {schema} FROM deskcomm_app;",
)

# The policies' terms as PostgreSQL prints them back (pg_policies), before and after, and as
# written: (settable, by role) for the bypass and for the tenant.
TERMS = (
    (
        re.compile(
            r"\( SELECT current_setting\('app\.rls_bypass'::text, true\)"
            r"(?: AS current_setting)?\) = 'on'::text"
        ),
        re.compile(
            r"\( SELECT \(\(current_setting\('app\.rls_bypass'::text, true\) = 'on'::text\) AND "
            r"pg_has_role\('deskcomm_platform'::name, 'MEMBER'::text\)\)(?: AS \"\?column\?\")?\)"
        ),
        "(SELECT current_setting('app.rls_bypass', true)) = 'on'",
        "(SELECT current_setting('app.rls_bypass', true) = 'on'"
        " AND pg_has_role('deskcomm_platform', 'MEMBER'))",
    ),
    (
        re.compile(
            r"\( SELECT \(NULLIF\(current_setting\('app\.organization_id'::text, true\), "
            r"''::text\)\)::uuid(?: AS \"nullif\")?\)"
        ),
        re.compile(r"\( SELECT deskcomm_tenant\(\)(?: AS deskcomm_tenant)?\)"),
        "(SELECT nullif(current_setting('app.organization_id', true), '')::uuid)",
        "(SELECT public.deskcomm_tenant())",
    ),
)
POLICIES_SQL = """
SELECT schemaname, tablename, policyname, qual, with_check FROM pg_policies
 WHERE concat(qual, ' ', with_check) LIKE '%app.rls_bypass%'
 ORDER BY 1, 2, 3
"""


def rewrite_policies(forward: bool, schema_editor: Any) -> None:
    """Every policy reading the bypass gets its terms in the other form (both clauses)."""
    quote = schema_editor.quote_name
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(POLICIES_SQL)
        policies = cursor.fetchall()
    for schema, table, policy, using, check in policies:
        clauses = []
        for keyword, expression in (("USING", using), ("WITH CHECK", check)):
            if expression is None or "app.rls_bypass" not in expression:
                continue
            rewritten, counts = expression, []
            for settable_form, role_form, settable_sql, role_sql in TERMS:
                find, written = (settable_form, role_sql) if forward else (role_form, settable_sql)
                rewritten, count = find.subn(lambda _, text=written: text, rewritten)
                counts.append(count)
            wanted = TERMS[0][1] if forward else TERMS[0][0]  # the bypass term: in every policy
            if not counts[0] and not wanted.search(expression):
                raise RuntimeError(
                    f"policy {policy} on {schema}.{table} reads app.rls_bypass in a form this "
                    f"migration does not know ({keyword} {expression}): rewrite it by hand"
                )
            if rewritten != expression:
                clauses.append(f"{keyword} ({rewritten})")
        if clauses:
            target = f"{quote(policy)} ON {quote(schema)}.{quote(table)}"
            schema_editor.execute(f"ALTER POLICY {target} {' '.join(clauses)}")


def by_role(apps: Any, schema_editor: Any) -> None:
    rewrite_policies(True, schema_editor)


def settable(apps: Any, schema_editor: Any) -> None:
    rewrite_policies(False, schema_editor)


# The tenant proof's key: 64 bytes (244 random bits from two UUIDs, zero-padded as HMAC pads a
# short key), kept as HMAC's inner and outer pads, readable by the platform's roles only (they
# may bypass anyway; pg_dump, run by the worker role, reads it).
TENANT_PROOF_SQL = """
CREATE SCHEMA deskcomm_private;
REVOKE ALL ON SCHEMA deskcomm_private FROM PUBLIC;
GRANT USAGE ON SCHEMA deskcomm_private TO deskcomm_platform;
CREATE TABLE deskcomm_private.tenant_key (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    inner_pad bytea NOT NULL,
    outer_pad bytea NOT NULL
);
REVOKE ALL ON deskcomm_private.tenant_key FROM PUBLIC;
GRANT SELECT ON deskcomm_private.tenant_key TO deskcomm_platform;
DO $$
DECLARE
    v_key bytea := decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')
                          || repeat('00', 32), 'hex');
    v_inner bytea := v_key;
    v_outer bytea := v_key;
BEGIN
    FOR i IN 0..63 LOOP
        v_inner := set_byte(v_inner, i, get_byte(v_key, i) # 54);  -- 0x36
        v_outer := set_byte(v_outer, i, get_byte(v_key, i) # 92);  -- 0x5c
    END LOOP;
    INSERT INTO deskcomm_private.tenant_key (inner_pad, outer_pad) VALUES (v_inner, v_outer);
END
$$;

-- A proof that the caller may act in `p_organization`: HMAC-SHA256 of its id, in hex.
CREATE FUNCTION public.deskcomm_tenant_proof(p_organization uuid) RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT encode(sha256(k.outer_pad
                         || sha256(k.inner_pad || convert_to(p_organization::text, 'UTF8'))),
                  'hex')
      FROM deskcomm_private.tenant_key k
$$;
REVOKE ALL ON FUNCTION public.deskcomm_tenant_proof(uuid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.deskcomm_tenant_proof(uuid) TO deskcomm_platform;

-- Whether `p_proof` is that proof (the same HMAC, compared here: one call, no other).
CREATE FUNCTION public.deskcomm_tenant_verified(p_organization uuid, p_proof text)
RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog AS $$
    SELECT coalesce(p_proof = encode(sha256(k.outer_pad || sha256(k.inner_pad
                                     || convert_to(p_organization::text, 'UTF8'))), 'hex'),
                    false)
      FROM deskcomm_private.tenant_key k
$$;
REVOKE ALL ON FUNCTION public.deskcomm_tenant_verified(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION public.deskcomm_tenant_verified(uuid, text) TO deskcomm_app;

-- The session's tenant as the policies see it: `app.organization_id`, taken as it is from a
-- member of deskcomm_platform (the current user: the invoker, this function being one), from
-- any other role only with its proof; NULL otherwise (nothing visible). A plain SQL expression,
-- so the planner inlines it into the policy's init plan: a member pays pg_has_role only. (No SET
-- search_path: its names are qualified or pg_catalog's, and the roles that call it may create
-- nothing that could stand in for them.)
CREATE FUNCTION public.deskcomm_tenant() RETURNS uuid
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN pg_catalog.pg_has_role('deskcomm_platform', 'MEMBER')
                  OR public.deskcomm_tenant_verified(
                         NULLIF(pg_catalog.current_setting('app.organization_id', true),
                                           '')::uuid,
                         pg_catalog.current_setting('app.tenant_proof', true))
                THEN NULLIF(pg_catalog.current_setting('app.organization_id', true),
                                       '')::uuid END
$$;
"""
NO_TENANT_PROOF_SQL = """
DROP FUNCTION public.deskcomm_tenant();
DROP FUNCTION public.deskcomm_tenant_verified(uuid, text);
DROP FUNCTION public.deskcomm_tenant_proof(uuid);
DROP SCHEMA deskcomm_private CASCADE;
"""


# The key by its prefix and the presented token's hash, found under the bypass (as the owner,
# a member of deskcomm_platform: SECURITY DEFINER), then the caller's session scoped to the
# key's organization, with its proof, unless the key is revoked. The search path is fixed: no
# caller's schema can stand in for the table. Only the app.* settings are set; they outlive
# the call (the SET clause restores the search path alone).
AUTHENTICATE_SQL = """
CREATE FUNCTION deskcomm_api_key_authenticate(p_prefix text, p_hash text, p_local boolean)
RETURNS SETOF deskcomm_apikey
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, public AS $$
DECLARE
    v_bypass text := coalesce(current_setting('app.rls_bypass', true), '');
    v_key public.deskcomm_apikey%ROWTYPE;
BEGIN
    PERFORM set_config('app.rls_bypass', 'on', true);
    SELECT * INTO v_key FROM public.deskcomm_apikey
     WHERE prefix = p_prefix AND secret_hash = p_hash;
    PERFORM set_config('app.rls_bypass', v_bypass, true);
    IF v_key.id IS NULL THEN
        RETURN;
    END IF;
    IF v_key.revoked_at IS NULL THEN
        PERFORM set_config('app.organization_id', v_key.organization_id::text, p_local);
        PERFORM set_config('app.tenant_proof', public.deskcomm_tenant_proof(v_key.organization_id),
                           p_local);
        PERFORM set_config('app.rls_bypass', 'off', p_local);
    END IF;
    RETURN NEXT v_key;
END
$$;
REVOKE ALL ON FUNCTION deskcomm_api_key_authenticate(text, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION deskcomm_api_key_authenticate(text, text, boolean) TO deskcomm_app;
DROP FUNCTION deskcomm_api_key_authenticate(text);
DROP FUNCTION deskcomm_api_key_authenticate(text, boolean);
"""


def _earlier(module: str) -> str:
    return str(importlib.import_module(f"core.migrations.{module}").AUTHENTICATE_SQL)


UNAUTHENTICATE_SQL = (
    "DROP FUNCTION deskcomm_api_key_authenticate(text, text, boolean);\n"
    + _earlier("0008_row_level_security")
    + _earlier("0012_api_key_authenticate_local")
)


class Migration(migrations.Migration):
    # After every migration that made a tenant table (their policies are rewritten here).
    dependencies = [
        ("core", "0012_api_key_authenticate_local"),
        ("ai", "0001_initial"),
        ("crm", "0004_contact_match_indexes"),
        ("eventbus", "0023_delivery_dead_group_idx"),
        ("jobs", "0001_initial"),
        ("lgpd", "0004_nuvemshop_channel"),
        ("nuvemshop", "0001_initial"),
        ("pipelines", "0001_pipelines"),
        ("webhooks", "0004_attempt_delivery_no_constraint"),
        ("whatsapp", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(GROUPS_SQL, migrations.RunSQL.noop),
        migrations.RunSQL(GRANTS_SQL, REVOKE_GRANTS_SQL),
        migrations.RunSQL(TENANT_PROOF_SQL, NO_TENANT_PROOF_SQL),
        migrations.RunPython(by_role, settable),
        migrations.RunSQL(AUTHENTICATE_SQL, UNAUTHENTICATE_SQL),
    ]
