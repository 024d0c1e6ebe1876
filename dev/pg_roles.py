"""SQL that sets up the application's roles on the embedded server (none is a superuser).

The roles of core.db_roles (docs/configuration.md, "Database roles"): the owner `deskcomm`
(migrations), the worker role `deskcomm_worker` (platform processes: may use the RLS bypass) and the
web role `deskcomm_web` (may not), and the two group roles every database's policies and grants
name, `deskcomm_platform` (whose members may bypass) and `deskcomm_app` (rows and sequences). On
this server (trust authentication on 127.0.0.1) they need no passwords.
"""

from __future__ import annotations

PG_SUPERUSER = "postgres"
# The application's owner: not a superuser, so row-level security applies to it (superusers
# skip it). CREATEDB: the test suite and the benchmarks create scratch databases;
# pg_checkpoint: the drain benchmark's CHECKPOINT.
APP_ROLE = "deskcomm"
WORKER_ROLE = "deskcomm_worker"  # CREATEDB: the restore check's scratch database
WEB_ROLE = "deskcomm_web"
PLATFORM_GROUP = "deskcomm_platform"  # core.db_roles.PLATFORM_GROUP: named by every policy
APP_GROUP = "deskcomm_app"  # core.db_roles.APP_GROUP

# The roles and their memberships, then every database a superuser-era setup left owned by the
# superuser handed over.
CREATE_APP_ROLE_SQL = f"""
DO $$
DECLARE r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        CREATE ROLE {APP_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{PLATFORM_GROUP}') THEN
        CREATE ROLE {PLATFORM_GROUP} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_GROUP}') THEN
        CREATE ROLE {APP_GROUP} NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{WORKER_ROLE}') THEN
        CREATE ROLE {WORKER_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{WEB_ROLE}') THEN
        CREATE ROLE {WEB_ROLE} LOGIN NOCREATEDB NOCREATEROLE NOSUPERUSER NOBYPASSRLS;
    END IF;
    -- The owner and the worker may bypass; the worker and the web role use the rows.
    FOR r IN SELECT * FROM (VALUES ('{PLATFORM_GROUP}', '{APP_ROLE}'),
                                   ('{PLATFORM_GROUP}', '{WORKER_ROLE}'),
                                   ('{APP_GROUP}', '{WORKER_ROLE}'),
                                   ('{APP_GROUP}', '{WEB_ROLE}')) AS m (grp, member) LOOP
        IF NOT pg_has_role(r.member, r.grp, 'MEMBER') THEN
            EXECUTE format('GRANT %I TO %I', r.grp, r.member);
        END IF;
    END LOOP;
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

# Per database (template1, so every database made later has it, and the project's): the text of
# other sessions' statements (pg_stat_activity.query) is for the platform's roles only. Sessions
# of one role see each other's statements, and Django sends its parameters inside the text, so
# a web session could read another web session's rows there. (A view's functions are checked
# against its user: the function is granted back with the view.)
HARDEN_CATALOG_SQL = f"""
REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) FROM PUBLIC;
GRANT SELECT ON pg_catalog.pg_stat_activity TO {PLATFORM_GROUP};
GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) TO {PLATFORM_GROUP};
GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) TO {PLATFORM_GROUP};
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
