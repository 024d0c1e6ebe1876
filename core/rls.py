"""Row-level security, the second tenant wall: who a database session may see.

Tenant tables (migration deskcomm 0008, core.migration_ops.tenant_wall) have a policy that shows
a row only when the session set the bypass (`app.rls_bypass = on`) **and its role is a member of
`deskcomm_platform`**, or the row's organization is the session's tenant (`app.organization_id`).
A session that set neither sees nothing (fails closed), whatever a query forgot to filter. Only
roles that are not superusers are subject to it (system check deskcomm.W003).

The bypass is a setting, but not one every role may use (migration core 0013, core.db_roles):
the owner (migrations, the SECURITY DEFINER API key lookup) and the worker role are members of
deskcomm_platform; the web role is not, so nothing a web connection sends (`SET
app.rls_bypass = on`, `set_config`, `SET ROLE`, a function call) shows it another tenant's rows.

- **Platform processes bypass, explicitly, per process:** every `manage.py` command except the
  web servers (drain_events, deliver_webhooks, rundramatiq, run_scheduler, migrate, the LGPD and
  maintenance commands...) calls `bypass_process()` when Django starts (`DeskcommConfig.ready`),
  which puts `-c app.rls_bypass=on` in the startup options of every connection the process (and
  its children: rundramatiq's workers, pg_dump) opens: no extra round trip. They connect as the
  worker role (or the owner), so the setting takes effect. Anything else long-running that is
  not a manage.py command calls `bypass_process()` before its first query (or runs with
  DB_RLS_BYPASS=true). Inside such a process `set_scope(organization_id=...)` narrows one
  connection to a tenant (a handler thread's) and `reset_scope` puts the bypass back.
- **Web processes fail closed** and scope each request: an API key sets its tenant (the lookup
  function `deskcomm_api_key_authenticate` does it in the same statement, only for the key's
  holder); `request_finished` puts the session back. What a web request must do across tenants
  (staff who see every organization: core.admin_scope; /metrics, cron, the health checks,
  the receivers' and the export link's lookups) asks `set_scope(bypass=True)` as before: when
  the web role cannot bypass (DATABASE_WEB_URL names it) this moves the thread's `default` (and
  `replica`) connection to the `platform` alias, connected as the worker role, until the scope
  changes or the request ends. An API-key request may never do so (PermissionError).
- **Behind a transaction-mode pooler** (DATABASE_POOLER=transaction) the scope is never a
  session's: it is remembered on the connection and set transaction-locally at the start of
  each transaction (core.pooler), the bypass included.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import pq

from core import db_roles, pooler

TENANT = "app.organization_id"
# HMAC of the tenant's id (core 0013): what makes `app.organization_id` count for a role outside
# deskcomm_platform. Minted by deskcomm_tenant_proof(), which only the platform's roles run.
PROOF = "app.tenant_proof"
BYPASS = db_roles.BYPASS_SETTING
BYPASS_OPTION = db_roles.BYPASS_OPTION
PROCESS_ENV = db_roles.PROCESS_BYPASS_ENV
# manage.py commands that serve web requests: scoped per request, never bypassing as a whole.
WEB_COMMANDS = db_roles.WEB_COMMANDS
# While a web thread does platform work, its aliases are these connections (as the worker role).
PLATFORM_TWINS = {"default": db_roles.PLATFORM_ALIAS, "replica": db_roles.PLATFORM_REPLICA_ALIAS}

SET_SCOPE_SQL = (
    "SELECT set_config(%s, %s, false), set_config(%s, %s, false), set_config(%s, %s, false)"
)
PROOF_SQL = "SELECT deskcomm_tenant_proof(%s)"
# The reset to the process default (bypass on or off), as one simple query with no parameters.
RESET_SQL = {
    bypass: (
        f"SELECT set_config('{TENANT}', '', false), set_config('{PROOF}', '', false), "
        f"set_config('{BYPASS}', '{'on' if bypass else 'off'}', false)"
    ).encode()
    for bypass in (False, True)
}
IDLE = pq.TransactionStatus.IDLE
_DIRTY = "_deskcomm_rls_scoped"  # attribute on a connection wrapper: scoped away from its default
_SCOPE = "_deskcomm_rls_scope"  # on a connection wrapper: (tenant, bypass, proof) it was given
_TENANT = "_deskcomm_rls_tenant"  # on a connection wrapper: the tenant's UUID (no bypass), or None
_thread = threading.local()  # enter_tenant's wrapper of this thread's default connection
# Per thread (Django's connections are): the web connections set aside while on the platform's.
_platform = threading.local()
# Set when an API key scoped the request: such a request never reaches the platform connection.
_key_request: ContextVar[bool] = ContextVar("deskcomm_rls_key_request", default=False)


def select_for_process(argv: Sequence[str]) -> None:
    """At start-up: bypass for platform processes (see the module docstring), else closed. A
    process connected as the web role is a web process whatever its command (DATABASE_ROLE=web
    manage.py shell, check): its bypass is the platform alias's, per scope."""
    if getattr(settings, "DATABASE_ROLE", "") == db_roles.WEB and platform_configured():
        return
    if wants_bypass(argv, os.environ):
        bypass_process()


def wants_bypass(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """A manage.py command other than a web server, or DB_RLS_BYPASS set (inherited by the
    children of a bypassing process, e.g. rundramatiq's workers)."""
    if db_roles.truthy(env.get(PROCESS_ENV)):
        return True
    command = db_roles.managed_command(argv)
    return bool(command) and command not in WEB_COMMANDS


def bypass_process() -> None:
    """Every connection this process (and its children) opens from now on bypasses RLS."""
    os.environ[PROCESS_ENV] = "true"
    options = os.environ.get("PGOPTIONS", "")
    if BYPASS_OPTION not in options:
        os.environ["PGOPTIONS"] = f"{options} {BYPASS_OPTION}".strip()
    for alias in settings.DATABASES:
        if pooler.pooled(alias):
            continue  # PgBouncer refuses startup options: the prologue sets the bypass
        db_options = connections[alias].settings_dict.setdefault("OPTIONS", {})
        current = db_options.get("options", "")
        if BYPASS_OPTION not in current:
            db_options["options"] = f"{current} {BYPASS_OPTION}".strip()


def process_bypasses() -> bool:
    return os.environ.get(PROCESS_ENV) == "true"


def default_bypass(connection: BaseDatabaseWrapper) -> bool:
    """Whether `connection` bypasses when nothing scoped it: the platform aliases always, the
    others in a platform process."""
    return connection.alias in db_roles.PLATFORM_ALIASES or process_bypasses()


pooler.use_default_bypass(default_bypass)  # the pooled prologue's scope when nothing set one


def platform_configured() -> bool:
    """Whether this process has a `platform` alias: its own role cannot use the bypass."""
    return db_roles.PLATFORM_ALIAS in settings.DATABASES


def on_platform() -> bool:
    """Whether this thread's `default` connection is the platform one now."""
    return getattr(_platform, "saved", None) is not None


def set_scope(
    *,
    organization_id: uuid.UUID | None = None,
    bypass: bool = False,
    using: str = "default",
    proof: str | None = None,
) -> None:
    """Scope this connection's session: a tenant, the bypass, or (neither) nothing visible.

    Session-level (requests run in autocommit), undone by `reset_scope` at the request's end.
    In a web process with a `platform` alias the bypass is that connection instead (see the
    module docstring); a tenant or a closed scope brings the web connection back, and the
    tenant's `proof` (when not given) comes from the platform connection: one round trip.
    """
    if using == "default" and platform_configured():
        if bypass:
            _enter_platform()
            return
        _leave_platform()
    connection = connections[using]
    tenant = str(organization_id) if organization_id else ""
    if proof is None:
        proof = tenant_proof(organization_id) if organization_id else ""
    mark_scoped(connection, organization_id=organization_id, bypass=bypass, proof=proof)
    if pooler.pooled(using):
        pooler.remember_scope(connection, tenant, bypass, proof)
        return
    with connection.cursor() as cursor:
        cursor.execute(
            SET_SCOPE_SQL, [TENANT, tenant, PROOF, proof, BYPASS, "on" if bypass else "off"]
        )


def tenant_proof(organization_id: uuid.UUID) -> str:
    """What makes `organization_id` this session's tenant for a role outside deskcomm_platform:
    asked of the platform connection in a web process that has one; elsewhere the role is the
    platform's (worker, owner) and needs none."""
    if not platform_configured():
        return ""
    with connections[db_roles.PLATFORM_ALIAS].cursor() as cursor:
        cursor.execute(PROOF_SQL, [organization_id])
        row = cursor.fetchone()
    return str(row[0]) if row and row[0] else ""


def mark_scoped(
    connection: BaseDatabaseWrapper,
    *,
    organization_id: uuid.UUID | None = None,
    bypass: bool = False,
    proof: str = "",
) -> None:
    """Record that `connection`'s session was scoped (by set_scope or by SQL) to this."""
    setattr(connection, _DIRTY, True)
    tenant = str(organization_id) if organization_id else ""
    setattr(connection, _SCOPE, (tenant, bypass, proof))
    setattr(connection, _TENANT, None if bypass else organization_id)


def reset_scope(using: str = "default") -> None:
    """Back to the process's default (bypass or closed) if this request scoped the session."""
    if using == "default":
        _leave_platform()
    connection = connections[using]
    if not getattr(connection, _DIRTY, False):
        return
    setattr(connection, _DIRTY, False)
    setattr(connection, _SCOPE, None)
    setattr(connection, _TENANT, None)
    if pooler.pooled(using):
        pooler.remember_scope(connection, None, False, "")
        return
    if connection.connection is None:
        return  # closed: the session (and its settings) went with it
    if not connection.in_atomic_block and connection.connection.closed:
        connection.close()  # the server ended it (libpq knows): its settings went with it
        return
    if connection.in_atomic_block or connection.connection.info.transaction_status != IDLE:
        # Inside a transaction (tests, scripts) it is one of the transaction's statements.
        bypass = "on" if default_bypass(connection) else "off"
        with connection.cursor() as cursor:
            cursor.execute(SET_SCOPE_SQL, [TENANT, "", PROOF, "", BYPASS, bypass])
        return
    _reset_idle(connection)


def _reset_idle(connection: BaseDatabaseWrapper) -> None:
    """The reset of an idle session (the end of every API request): one simple query straight
    through libpq, which releases the GIL while it waits. Through a cursor the same round trip spent
    70-100 us of Python in psycopg's and Django's execute; this spends about 15 (docs/benchmarks.md,
    issue 23). A session whose reset fails is closed, never handed to the next request."""
    try:
        result = connection.connection.pgconn.exec_(RESET_SQL[default_bypass(connection)])
        failed = None if result.status == pq.ExecStatus.TUPLES_OK else result.error_message
    except psycopg.Error as exc:  # libpq returned no result at all
        failed = str(exc).encode()
    if failed is not None:
        connection.close()
        message = (failed or b"no result").decode(errors="replace").strip()
        raise OperationalError(f"resetting the session's tenant scope failed: {message}")


def enter_tenant(organization_id: uuid.UUID, using: str = "default") -> None:
    """Scope this thread's connection to one tenant, and leave it so (a worker's handler thread
    runs each delivery inside its organization: eventbus.dispatch.drain). No statement when the
    connection is already scoped to it; a connection opened since (the process's default scope)
    is scoped again."""
    # The drain's case: this thread's wrapper of the default alias, found once (Django keeps one
    # wrapper per alias and thread for the thread's life; closing it keeps the wrapper).
    # (Not in a web process with a platform alias: there `default` may be either connection.)
    if using == "default" and not platform_configured():
        connection = getattr(_thread, "wrapper", None)
        if connection is None:
            connection = _thread.wrapper = connections[using]
    else:
        connection = connections[using]
    # A closed connection reopens with the process's default scope, whatever it was given.
    if connection.connection is not None and connection.__dict__.get(_TENANT) == organization_id:
        return
    set_scope(organization_id=organization_id, using=using)


def _enter_platform() -> None:
    """This thread's `default` (and `replica`) connection becomes the platform alias's, which
    bypasses from its startup options: nothing is sent."""
    if on_platform():
        return
    if _key_request.get():
        raise PermissionError("a request authenticated by an API key never uses the platform role")
    if connections["default"].in_atomic_block:
        raise RuntimeError("cannot move to the platform connection inside a transaction")
    saved = {}
    for alias, twin in PLATFORM_TWINS.items():
        if twin in settings.DATABASES:
            saved[alias] = connections[alias]
            connections[alias] = connections[twin]
    _platform.saved = saved


def _leave_platform() -> None:
    """Back to this thread's own `default` (and `replica`) connection."""
    saved = getattr(_platform, "saved", None)
    if saved is None:
        return
    if connections["default"].in_atomic_block:
        raise RuntimeError("cannot leave the platform connection inside one of its transactions")
    for alias, connection in saved.items():
        connections[alias] = connection
    _platform.saved = None


def leave_platform() -> None:
    """Back on this thread's own connections if a bypass moved it to the platform's."""
    if on_platform():
        _leave_platform()


def mark_key_request(*, active: bool = True) -> None:
    """core.selectors: an API key scoped this request (cleared at the request's boundary)."""
    _key_request.set(active)


@contextmanager
def scoped(*, organization_id: uuid.UUID | None = None, bypass: bool = False) -> Iterator[None]:
    """`set_scope` for a block (tests, scripts), then back to the process default."""
    set_scope(organization_id=organization_id, bypass=bypass)
    try:
        yield
    finally:
        reset_scope()


def follow_scope(*, source: str, target: str) -> None:
    """Give connection `target` the session scope of `source` (the read replica reads a
    request's rows as the primary would): one statement when they differ, none otherwise."""
    wanted = getattr(connections[source], _SCOPE, None)
    follower = connections[target]
    # A closed connection reopens with the process's default scope, whatever it was given.
    current = getattr(follower, _SCOPE, None) if follower.connection is not None else None
    if current == wanted:
        return
    if wanted is None:
        reset_scope(target)
        return
    tenant, bypass, proof = wanted
    set_scope(
        organization_id=uuid.UUID(tenant) if tenant else None,
        bypass=bypass,
        using=target,
        proof=proof,
    )


def on_request_boundary(**kwargs: Any) -> None:
    """request_started / request_finished: never let a request inherit another's scope."""
    mark_key_request(active=False)
    reset_scope("default")  # first: back on this thread's own connections
    for alias in connections:
        if alias != "default":
            reset_scope(alias)
