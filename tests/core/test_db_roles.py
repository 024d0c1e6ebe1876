"""The database roles (core.db_roles, migration core 0013): the web role cannot lift the wall.

With two organizations' rows in every table that has a tenant policy (walked from pg_policies),
a connection as the web role, scoped to A the way an API request is (the key lookup), tries
everything it may send to see B's rows — the bypass setting, B's id as its tenant, with and
without A's proof, SET ROLE to every role of the project, RESET ROLE, SET SESSION
AUTHORIZATION, every SECURITY DEFINER function it can execute, transaction-local settings, a
temporary view, the catalog — and after each, counts B's rows in every table: none. A worker
role's connection with the bypass sees both. These need the roles on the server (python3 -m dev
creates them; CI fails without them).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from core import api_keys, db_roles
from core.models import ApiKey, Organization
from tests.support import tenant_rows
from tests.support.api import issue_key
from tests.support.roles import connect

pytestmark = pytest.mark.django_db(transaction=True)

HAS_ORGANIZATION_SQL = """
SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s)
                AND attname = 'organization_id' AND NOT attisdropped)
"""


def rows_of(table: str, organization: Organization) -> list[str]:
    """The ctids of `organization`'s rows in `table`, read by this bypassing test process."""
    with connection.cursor() as cursor:
        cursor.execute(HAS_ORGANIZATION_SQL, [table])
        by_organization = cursor.fetchone()[0]
        where = (
            "organization_id = %s"
            if by_organization  # the attempts: through their delivery
            else "delivery_id IN (SELECT id FROM eventbus_delivery WHERE organization_id = %s)"
        )
        cursor.execute(
            sql.SQL("SELECT ctid::text FROM {} WHERE " + where).format(sql.Identifier(table)),
            [organization.pk],
        )
        return [row[0] for row in cursor.fetchall()]


def visible(conn: psycopg.Connection[Any], table: str, ctids: list[str]) -> int:
    """How many of these rows `conn` reads (0 too when the statement is refused)."""
    try:
        with conn.transaction():  # a savepoint inside an attack's own transaction
            row = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE ctid = ANY(%s::tid[])").format(
                    sql.Identifier(table)
                ),
                [ctids],
            ).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return 0
    return int(row[0]) if row else 0


@pytest.fixture
def tenants(org: Organization, org_b: Organization) -> dict[str, dict[str, list[str]]]:
    """Both organizations' rows in every policy table: {table: {"a": ctids, "b": ctids}}."""
    tenant_rows.seed(org)
    tenant_rows.seed(org_b)
    tables = tenant_rows.policy_tables()
    assert len(tables) >= 30
    rows = {table: {"a": rows_of(table, org), "b": rows_of(table, org_b)} for table in tables}
    assert [t for t, found in rows.items() if not (found["a"] and found["b"])] == []
    return rows


def key_of(organization: Organization) -> tuple[str, str]:
    """A new key's prefix and the hash of its full value."""
    token = issue_key(organization, "events:read")
    key = ApiKey.objects.get(prefix=api_keys.prefix_of(token))
    return key.prefix, key.secret_hash


@pytest.fixture
def web() -> Iterator[psycopg.Connection[Any]]:
    conn = connect(db_roles.WEB)
    yield conn
    conn.close()


def test_the_web_role_has_rows_only_no_schema_and_no_way_into_the_platform(
    web: psycopg.Connection[Any],
) -> None:
    flags = web.execute(
        "SELECT rolsuper, rolbypassrls, rolcreaterole, rolcreatedb,"
        " pg_has_role(current_user, %s, 'MEMBER'), pg_has_role(current_user, %s, 'USAGE')"
        " FROM pg_roles WHERE rolname = current_user",
        [db_roles.PLATFORM_GROUP, db_roles.APP_GROUP],
    ).fetchone()
    assert flags == (False, False, False, False, False, True)
    schemas = web.execute(
        "SELECT nspname FROM pg_namespace WHERE has_schema_privilege(oid, 'CREATE')"
    ).fetchall()
    assert schemas == []
    # Every table of the application's schemas is granted rows only (through deskcomm_app).
    extra = web.execute(
        "SELECT c.oid::regclass::text, p FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " CROSS JOIN unnest(ARRAY['TRUNCATE', 'REFERENCES', 'TRIGGER']) p"
        " WHERE n.nspname IN ('public', 'dramatiq') AND c.relkind IN ('r', 'p')"
        "   AND has_table_privilege(c.oid, p)"
    ).fetchall()
    assert extra == []


def test_no_statement_of_a_web_role_connection_reads_another_tenants_rows(
    tenants: dict[str, dict[str, list[str]]],
    org: Organization,
    org_b: Organization,
    web: psycopg.Connection[Any],
) -> None:
    a_prefix, a_hash = key_of(org)
    b_prefix, _ = key_of(org_b)

    def b_rows_seen() -> dict[str, int]:
        seen = {table: visible(web, table, rows["b"]) for table, rows in tenants.items()}
        return {table: count for table, count in seen.items() if count}

    # Scoped to A as an API request is: the key lookup sets the tenant and its proof.
    found = web.execute(
        "SELECT organization_id, current_setting('app.tenant_proof', true)"
        " FROM deskcomm_api_key_authenticate(%s, %s, false)",
        [a_prefix, a_hash],
    ).fetchone()
    assert found is not None and found[0] == org.pk
    a_proof = found[1]
    assert len(a_proof) == 64
    # It works: every table shows the web connection all of A's rows, and none of B's.
    assert {t: visible(web, t, rows["a"]) for t, rows in tenants.items()} == {
        t: len(rows["a"]) for t, rows in tenants.items()
    }
    assert b_rows_seen() == {}

    b = str(org_b.pk)
    attacks: list[tuple[str, list[Any]]] = [
        ("SET app.rls_bypass = on", []),
        ("SELECT set_config('app.rls_bypass', 'on', false)", []),
        ("SET app.organization_id = %s" % sql.quote(b), []),  # noqa: UP031 (SET takes no params)
        ("SELECT set_config('app.organization_id', %s, false)", [b]),
        ("SELECT set_config('app.tenant_proof', %s, false)", [a_proof]),  # A's proof, B's id
        ("SELECT set_config('app.tenant_proof', '', false)", []),
        ("SELECT set_config('app.organization_id', '', false)", []),  # no tenant: bypass only
        ("SET ROLE deskcomm_app", []),
        ("RESET ROLE", []),
        ("SET ROLE NONE", []),
        ("SET row_security = off", []),
        ("RESET row_security", []),
        ("SELECT * FROM deskcomm_api_key_authenticate(%s, %s, false)", [b_prefix, a_hash]),
        ("SELECT * FROM deskcomm_api_key_authenticate(%s, '', false)", [b_prefix]),
        ("SELECT * FROM deskcomm_api_key_authenticate(%s, NULL, false)", [b_prefix]),
        ("SELECT deskcomm_tenant_verified(%s, %s)", [b, a_proof]),
        ("SELECT deskcomm_tenant()", []),
        ("DISCARD ALL", []),
        ("SET app.rls_bypass = on", []),
        ("SELECT set_config('app.organization_id', %s, false)", [b]),
    ]
    refused = [
        "SET ROLE deskcomm_worker",
        "SET ROLE deskcomm_platform",
        "SET ROLE deskcomm",
        "SET SESSION AUTHORIZATION deskcomm",
        "SET SESSION AUTHORIZATION deskcomm_worker",
        f"SELECT deskcomm_tenant_proof('{b}')",
        "SELECT * FROM deskcomm_private.tenant_key",
        "CREATE TABLE public.smuggle (id int)",
        "CREATE FUNCTION public.smuggle() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        "ALTER TABLE deskcomm_contact DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE deskcomm_contact NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY tenant_wall ON deskcomm_contact",
        "ALTER POLICY tenant_wall ON deskcomm_contact USING (true)",
        "GRANT deskcomm_platform TO CURRENT_USER",
        "ALTER ROLE CURRENT_USER BYPASSRLS",
        "CREATE ROLE smuggler LOGIN BYPASSRLS",
    ]
    for statement, params in attacks:
        with contextlib.suppress(psycopg.Error):  # refused or not, what does it show?
            web.execute(statement, params)
        assert b_rows_seen() == {}, statement
    for statement in refused:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            web.execute(statement)
        assert b_rows_seen() == {}, statement
    # Transaction-local settings, and a view of its own (it runs with the web role's rights).
    with web.transaction():
        web.execute("SET LOCAL app.rls_bypass = on")
        web.execute("SELECT set_config('app.organization_id', %s, true)", [b])
        web.execute("SELECT set_config('app.tenant_proof', %s, true)", [a_proof])
        assert b_rows_seen() == {}
        web.execute("CREATE TEMPORARY VIEW everyone AS SELECT * FROM deskcomm_contact")
        assert web.execute("SELECT count(*) FROM everyone").fetchone() == (0,)
    # Writing into B is refused as well (WITH CHECK), whatever the settings say.
    web.execute("SET app.rls_bypass = on")
    web.execute("SELECT set_config('app.organization_id', %s, false)", [b])
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        web.execute(
            "INSERT INTO deskcomm_lead (id, organization_id, name, stage_id, created_at,"
            " updated_at) VALUES (%s, %s, 'smuggled', 'new', now(), now())",
            [uuid.uuid4(), b],
        )


def test_the_only_security_definer_functions_a_web_role_may_call_are_reviewed(
    web: psycopg.Connection[Any],
) -> None:
    """A new SECURITY DEFINER function the web role can execute must be added to the attacks
    above (and here) on purpose."""
    callable_ = web.execute(
        "SELECT p.oid::regprocedure::text FROM pg_proc p"
        " WHERE p.prosecdef AND has_function_privilege(p.oid, 'EXECUTE') ORDER BY 1"
    ).fetchall()
    assert [row[0] for row in callable_] == [
        "deskcomm_api_key_authenticate(text,text,boolean)",
        "deskcomm_tenant_verified(uuid,text)",
    ]


def test_other_sessions_statements_are_not_the_web_roles_to_read(
    web: psycopg.Connection[Any],
) -> None:
    """Django sends its parameters inside the statement's text: pg_stat_activity.query would
    show another web session's rows (and the proofs it sets). python3 -m dev revokes it."""
    revoked = connection.cursor()
    with revoked:
        revoked.execute("SELECT has_table_privilege('public', 'pg_stat_activity', 'SELECT')")
        if revoked.fetchone()[0]:
            pytest.skip("this server's databases grant pg_stat_activity to PUBLIC (docs)")
    for statement in (
        "SELECT query FROM pg_stat_activity",
        "SELECT pg_stat_get_activity(NULL)",
        "SELECT pg_stat_get_backend_activity(1)",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            web.execute(statement)


def test_a_worker_role_connection_with_the_bypass_sees_every_tenant(
    tenants: dict[str, dict[str, list[str]]], org: Organization
) -> None:
    with connect(db_roles.WORKER) as worker:
        nothing = dict.fromkeys(tenants, 0)  # the setting is off: nothing, as for anyone
        assert {t: visible(worker, t, rows["b"]) for t, rows in tenants.items()} == nothing
        worker.execute("SET app.rls_bypass = on")
        both = {t: visible(worker, t, rows["a"] + rows["b"]) for t, rows in tenants.items()}
        assert both == {t: len(rows["a"]) + len(rows["b"]) for t, rows in tenants.items()}
        # Handlers run inside their delivery's tenant: a platform role needs no proof for it.
        worker.execute("SET app.rls_bypass = off")
        worker.execute("SELECT set_config('app.organization_id', %s, false)", [str(org.pk)])
        mine = {t: visible(worker, t, rows["a"] + rows["b"]) for t, rows in tenants.items()}
        assert mine == {t: len(rows["a"]) for t, rows in tenants.items()}
        assert worker.execute("SELECT count(*) FROM pg_stat_activity").fetchone()[0] >= 1


def test_every_policy_lets_only_the_platform_bypass_and_a_proven_tenant_in() -> None:
    """The terms of core 0013 in every policy that reads the bypass (core.migration_ops)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, qual, with_check FROM pg_policies"
            " WHERE concat(qual, with_check) LIKE '%app.%'"
        )
        policies = cursor.fetchall()
    assert len(policies) >= 30
    wrong = []
    for table, *clauses in policies:
        for clause in clauses:
            membership = "pg_has_role('deskcomm_platform'::name, 'MEMBER'::text)" in clause
            settable_tenant = "current_setting('app.organization_id'" in clause
            if not membership or settable_tenant:
                wrong.append((table, clause))
    assert wrong == []


@pytest.mark.parametrize(
    ("argv", "env", "explicit", "role"),
    [
        (["manage.py", "migrate"], {}, "", db_roles.OWNER),
        (["manage.py", "partition_event_log"], {}, "", db_roles.OWNER),
        (["manage.py", "drain_events"], {}, "", db_roles.WORKER),
        (["/venv/bin/django-admin", "backup"], {}, "", db_roles.WORKER),
        (["manage.py", "run_scheduler"], {}, "", db_roles.WORKER),
        (["manage.py", "runserver"], {}, "", db_roles.WEB),
        (["/venv/bin/gunicorn", "deskcomm.wsgi"], {}, "", db_roles.WEB),
        (["-m", "dramatiq", "django_dramatiq.setup"], {"DB_RLS_BYPASS": "true"}, "", "worker"),
        (["/venv/bin/gunicorn", "deskcomm.wsgi"], {}, "owner", db_roles.OWNER),
        (["manage.py", "migrate"], {}, "Web", db_roles.WEB),
    ],
)
def test_which_role_a_process_connects_as(
    argv: list[str], env: dict[str, str], explicit: str, role: str
) -> None:
    assert db_roles.process_role(argv, env, explicit=explicit) == role


def test_a_role_without_its_url_is_the_owner() -> None:
    urls = {"owner": "postgres://o@h/d", "worker": "", "web": "postgres://w@h/d"}
    assert db_roles.role_url(db_roles.WORKER, **urls) == urls["owner"]
    assert db_roles.role_url(db_roles.WEB, **urls) == urls["web"]
    with pytest.raises(ValueError, match="DATABASE_ROLE must be one of"):
        db_roles.process_role([], {}, explicit="admin")
