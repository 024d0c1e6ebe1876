"""SQL that sets up the application's role on the embedded server (not a superuser)."""

from __future__ import annotations

PG_SUPERUSER = "postgres"
# The application connects as this role: not a superuser, so row-level security applies to it
# (superusers skip it). CREATEDB: the test suite and the benchmarks create scratch databases;
# pg_checkpoint: the drain benchmark's CHECKPOINT.
APP_ROLE = "deskcomm"

# The role, then every database a superuser-era setup left owned by the superuser handed over.
CREATE_APP_ROLE_SQL = f"""
DO $$
DECLARE r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        CREATE ROLE {APP_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS;
    END IF;
    -- bench/drain.py settles the server with a CHECKPOINT between measurements.
    IF NOT pg_has_role('{APP_ROLE}', 'pg_checkpoint', 'MEMBER') THEN
        GRANT pg_checkpoint TO {APP_ROLE};
    END IF;
    FOR r IN SELECT datname FROM pg_database
              WHERE NOT datistemplate AND datname <> 'postgres'
                AND pg_get_userbyid(datdba) <> '{APP_ROLE}' LOOP
        EXECUTE format('ALTER DATABASE %I OWNER TO {APP_ROLE}', r.datname);
    END LOOP;
END
$$;
"""

# Inside the database: objects created while the project ran as the superuser change owner.
ADOPT_OBJECTS_SQL = f"""
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT nspname FROM pg_namespace
              WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')
                AND pg_get_userbyid(nspowner) = '{PG_SUPERUSER}' LOOP
        EXECUTE format('ALTER SCHEMA %I OWNER TO {APP_ROLE}', r.nspname);
    END LOOP;
    FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE pg_get_userbyid(n.nspowner) IN ('{APP_ROLE}', 'pg_database_owner')
                AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
                AND pg_get_userbyid(c.relowner) = '{PG_SUPERUSER}'
                AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid
                                 AND d.deptype IN ('a', 'i') AND c.relkind = 'S') LOOP
        EXECUTE format('ALTER %s %s OWNER TO {APP_ROLE}',
                       CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                      WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, r.name);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p
               JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE pg_get_userbyid(n.nspowner) IN ('{APP_ROLE}', 'pg_database_owner')
                AND pg_get_userbyid(p.proowner) = '{PG_SUPERUSER}' LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO {APP_ROLE}', r.name);
    END LOOP;
    FOR r IN SELECT t.oid::regtype AS name FROM pg_type t
               JOIN pg_namespace n ON n.oid = t.typnamespace
              WHERE pg_get_userbyid(n.nspowner) IN ('{APP_ROLE}', 'pg_database_owner')
                AND t.typtype IN ('e', 'd') AND pg_get_userbyid(t.typowner) = '{PG_SUPERUSER}' LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO {APP_ROLE}', r.name);
    END LOOP;
END
$$;
"""

# pgvector (the AI app's chunk table) is not a trusted extension: only a superuser may create it.
# Created in template1 (so every database made later, the test databases included, has it) and
# in the project's database; the AI migration's CREATE EXTENSION IF NOT EXISTS is then a no-op.
VECTOR_EXTENSION_SQL = "CREATE EXTENSION IF NOT EXISTS vector"
VECTOR_DATABASES = ("template1",)
