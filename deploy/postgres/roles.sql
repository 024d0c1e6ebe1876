-- Deskcomm's database roles (core/db_roles.py; docs/configuration.md "Database roles").
--
-- Run by the compose files' one-shot `db-roles` service, as the superuser of the postgres image
-- (POSTGRES_USER, `postgres`; no Deskcomm process ever connects as it), before `migrate`, on
-- every start: it creates what is missing and (re)sets the login roles' passwords from the
-- environment, so a new volume and an existing one end the same. Any other server: run it once
-- as a superuser with the same environment (psql 15+ for \getenv):
--   DESKCOMM_OWNER_ROLE=deskcomm DESKCOMM_OWNER_PASSWORD=... DESKCOMM_WORKER_ROLE=deskcomm_worker
--   DESKCOMM_WORKER_PASSWORD=... DESKCOMM_WEB_ROLE=deskcomm_web DESKCOMM_WEB_PASSWORD=...
--   psql -d deskcomm -f roles.sql
--
--   deskcomm_platform  NOLOGIN   its members may use the RLS bypass (every policy names it)
--   deskcomm_app       NOLOGIN   rows of every table, sequences (granted by migration core 0013)
--   the owner          LOGIN     the migrations; a member of deskcomm_platform. With
--                                DESKCOMM_OWNER_PASSWORD set: created when missing, never a
--                                superuser nor BYPASSRLS, the database's (and its public
--                                schema's) owner. Without it: the role running this script.
--   deskcomm_worker    LOGIN     workers, scheduler, jobs: deskcomm_platform + deskcomm_app
--   deskcomm_web       LOGIN     gunicorn: deskcomm_app only, so it can never lift the wall
\set ON_ERROR_STOP on
-- DESKCOMM_OWNER_ROLE: the tables' owner, when it is not the role running this script.
\set owner_role ''
\set owner_password ''
\set worker_role ''
\set worker_password ''
\set web_role ''
\set web_password ''
\getenv owner_role DESKCOMM_OWNER_ROLE
\getenv owner_password DESKCOMM_OWNER_PASSWORD
\getenv worker_role DESKCOMM_WORKER_ROLE
\getenv worker_password DESKCOMM_WORKER_PASSWORD
\getenv web_role DESKCOMM_WEB_ROLE
\getenv web_password DESKCOMM_WEB_PASSWORD
SELECT :'worker_role' <> '' AND :'worker_password' <> '' AND :'web_role' <> ''
       AND :'web_password' <> '' AS configured,
       coalesce(nullif(:'owner_role', ''), current_user) AS owner_role \gset
\if :configured
\else
  DO $$ BEGIN RAISE EXCEPTION 'set DESKCOMM_WORKER_ROLE, DESKCOMM_WORKER_PASSWORD, '
                              'DESKCOMM_WEB_ROLE and DESKCOMM_WEB_PASSWORD'; END $$;
\endif

SELECT format('CREATE ROLE %I NOLOGIN', name)
  FROM unnest(ARRAY['deskcomm_platform', 'deskcomm_app']) AS name
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) \gexec
SELECT format('CREATE ROLE %I LOGIN', name) FROM unnest(ARRAY[:'worker_role', :'web_role']) AS name
 WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = name) \gexec
-- The owner of a compose install: a login role of its own, subject to row-level security like
-- the others (an older volume's owner, the image's superuser then, loses SUPERUSER here).
SELECT :'owner_password' <> '' AND :'owner_role' <> current_user AS own_owner \gset
\if :own_owner
  SELECT format('CREATE ROLE %I LOGIN', :'owner_role')
   WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'owner_role') \gexec
  SELECT format('ALTER ROLE %I LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEROLE CREATEDB PASSWORD %L',
                :'owner_role', :'owner_password') \gexec
  SELECT format('ALTER DATABASE %I OWNER TO %I', current_database(), :'owner_role') \gexec
  SELECT format('ALTER SCHEMA public OWNER TO %I', :'owner_role') \gexec
  -- pgvector is not a trusted extension: only a superuser may create it (the AI migration's
  -- CREATE EXTENSION IF NOT EXISTS is then a no-op for the owner).
  SELECT 'CREATE EXTENSION IF NOT EXISTS vector'
   WHERE EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') \gexec
\endif
-- Never a superuser, never BYPASSRLS; CREATEDB for the worker's restore check (a scratch
-- database of its own).
SELECT format('ALTER ROLE %I NOSUPERUSER NOBYPASSRLS NOCREATEROLE CREATEDB PASSWORD %L',
              :'worker_role', :'worker_password') \gexec
SELECT format('ALTER ROLE %I NOSUPERUSER NOBYPASSRLS NOCREATEROLE NOCREATEDB PASSWORD %L',
              :'web_role', :'web_password') \gexec

SELECT format('GRANT %I TO %I', grp, member)
  FROM (VALUES ('deskcomm_platform', :'owner_role'), ('deskcomm_platform', :'worker_role'),
               ('deskcomm_app', :'worker_role'), ('deskcomm_app', :'web_role')) AS m (grp, member)
 WHERE NOT pg_has_role(member, grp, 'MEMBER') \gexec
-- The web role is never the platform's, whatever was granted by hand.
SELECT format('REVOKE deskcomm_platform FROM %I', :'web_role')
 WHERE EXISTS (SELECT FROM pg_auth_members
                WHERE roleid = 'deskcomm_platform'::regrole AND member = to_regrole(:'web_role'))
\gexec

-- Other sessions' statements (pg_stat_activity.query) are the platform's to read: sessions of
-- one role see each other's, and Django sends its parameters inside the text. In this database
-- and in template1 (the restore check's scratch database is made from it), which also gets the
-- vector extension that only a superuser may create.
\set harden 'REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC; REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM PUBLIC; REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) FROM PUBLIC; GRANT SELECT ON pg_catalog.pg_stat_activity TO deskcomm_platform; GRANT EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer), pg_catalog.pg_stat_get_backend_activity(integer) TO deskcomm_platform;'
:harden
\connect template1
:harden
SELECT 'CREATE EXTENSION IF NOT EXISTS vector'
 WHERE EXISTS (SELECT FROM pg_available_extensions WHERE name = 'vector') \gexec
