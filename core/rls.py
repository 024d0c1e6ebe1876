"""Row-level security, the second tenant wall: who a database session may see.

Tenant tables (migration deskcomm 0008) have a policy that shows a row only when the session
set the bypass (`app.rls_bypass = on`) or the row's organization is the session's tenant
(`app.organization_id`). A session that set neither sees nothing (fails closed), whatever a
query forgot to filter. Only roles that are not superusers are subject to it (system check
deskcomm.W003).

- **Platform processes bypass, explicitly, per process:** every `manage.py` command except the
  web servers (drain_events, deliver_webhooks, rundramatiq, run_scheduler, migrate, the LGPD and
  maintenance commands...) calls `bypass_process()` when Django starts (`DeskcommConfig.ready`),
  which puts `-c app.rls_bypass=on` in the startup options of every connection the process (and
  its children: rundramatiq's workers, pg_dump) opens: no extra round trip. Anything else
  long-running that is not a manage.py command calls `bypass_process()` before its first query
  (or runs with DB_RLS_BYPASS=true).
- **Web processes fail closed** and scope each request: an API key sets its tenant (the lookup
  function `deskcomm_api_key_authenticate` does it in the same statement), the platform admin
  sets the bypass (`AdminBypassMiddleware`), the views with no tenant (cron, metrics, the
  e-mailed export link) set it themselves; `request_finished` puts the session back.
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
from typing import Any

import psycopg
from django.conf import settings
from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import pq

from core import pooler

TENANT = "app.organization_id"
BYPASS = "app.rls_bypass"
BYPASS_OPTION = f"-c {BYPASS}=on"
PROCESS_ENV = "DB_RLS_BYPASS"
# manage.py commands that serve web requests: scoped per request, never bypassing as a whole.
WEB_COMMANDS = frozenset({"runserver", "testserver"})

SET_SCOPE_SQL = "SELECT set_config(%s, %s, false), set_config(%s, %s, false)"
# The reset to the process default (bypass on or off), as one simple query with no parameters.
RESET_SQL = {
    bypass: (
        f"SELECT set_config('{TENANT}', '', false), "
        f"set_config('{BYPASS}', '{'on' if bypass else 'off'}', false)"
    ).encode()
    for bypass in (False, True)
}
IDLE = pq.TransactionStatus.IDLE
_DIRTY = "_deskcomm_rls_scoped"  # attribute on a connection wrapper: scoped away from its default
_SCOPE = "_deskcomm_rls_scope"  # on a connection wrapper: (tenant, bypass) it was scoped to
_TENANT = "_deskcomm_rls_tenant"  # on a connection wrapper: the tenant's UUID (no bypass), or None
_thread = threading.local()  # enter_tenant's wrapper of this thread's default connection


def select_for_process(argv: Sequence[str]) -> None:
    """At start-up: bypass for platform processes (see the module docstring), else closed."""
    if wants_bypass(argv, os.environ):
        bypass_process()


def wants_bypass(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """A manage.py command other than a web server, or DB_RLS_BYPASS set (inherited by the
    children of a bypassing process, e.g. rundramatiq's workers)."""
    if env.get(PROCESS_ENV, "").lower() in ("1", "true", "yes", "on"):
        return True
    managed = os.path.basename(argv[0] if argv else "") in ("manage.py", "django-admin")
    command = argv[1] if len(argv) > 1 else ""
    return managed and bool(command) and command not in WEB_COMMANDS


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


def set_scope(
    *, organization_id: uuid.UUID | None = None, bypass: bool = False, using: str = "default"
) -> None:
    """Scope this connection's session: a tenant, the bypass, or (neither) nothing visible.

    Session-level (requests run in autocommit), undone by `reset_scope` at the request's end.
    """
    connection = connections[using]
    tenant = str(organization_id) if organization_id else ""
    mark_scoped(connection, organization_id=organization_id, bypass=bypass)
    if pooler.pooled(using):
        pooler.remember_scope(connection, tenant, bypass)
        return
    with connection.cursor() as cursor:
        cursor.execute(SET_SCOPE_SQL, [TENANT, tenant, BYPASS, "on" if bypass else "off"])


def mark_scoped(
    connection: BaseDatabaseWrapper,
    *,
    organization_id: uuid.UUID | None = None,
    bypass: bool = False,
) -> None:
    """Record that `connection`'s session was scoped (by set_scope or by SQL) to this."""
    setattr(connection, _DIRTY, True)
    setattr(connection, _SCOPE, (str(organization_id) if organization_id else "", bypass))
    setattr(connection, _TENANT, None if bypass else organization_id)


def reset_scope(using: str = "default") -> None:
    """Back to the process's default (bypass or closed) if this request scoped the session."""
    connection = connections[using]
    if not getattr(connection, _DIRTY, False):
        return
    setattr(connection, _DIRTY, False)
    setattr(connection, _SCOPE, None)
    setattr(connection, _TENANT, None)
    if pooler.pooled(using):
        pooler.remember_scope(connection, None, False)
        return
    if connection.connection is None:
        return  # closed: the session (and its settings) went with it
    if not connection.in_atomic_block and connection.connection.closed:
        connection.close()  # the server ended it (libpq knows): its settings went with it
        return
    if connection.in_atomic_block or connection.connection.info.transaction_status != IDLE:
        # Inside a transaction (tests, scripts) it is one of the transaction's statements.
        bypass = "on" if process_bypasses() else "off"
        with connection.cursor() as cursor:
            cursor.execute(SET_SCOPE_SQL, [TENANT, "", BYPASS, bypass])
        return
    _reset_idle(connection)


def _reset_idle(connection: BaseDatabaseWrapper) -> None:
    """The reset of an idle session (the end of every API request): one simple query straight
    through libpq, which releases the GIL while it waits. Through a cursor the same round trip
    spent 70-100 us of Python in psycopg's and Django's execute; this spends about 15 (README
    "Issue #23"). A session whose reset fails is closed, never handed to the next request."""
    try:
        result = connection.connection.pgconn.exec_(RESET_SQL[process_bypasses()])
        failed = None if result.status == pq.ExecStatus.TUPLES_OK else result.error_message
    except psycopg.Error as exc:  # libpq returned no result at all
        failed = str(exc).encode()
    if failed is not None:
        connection.close()
        message = (failed or b"no result").decode(errors="replace").strip()
        raise OperationalError(f"resetting the session's tenant scope failed: {message}")


def enter_tenant(organization_id: uuid.UUID, using: str = "default") -> None:
    """Scope this thread's connection to one tenant, and leave it so (a worker's handler thread
    runs each delivery inside its organization: eventbus.drain). No statement when the
    connection is already scoped to it; a connection opened since (the process's default scope)
    is scoped again."""
    # The drain's case: this thread's wrapper of the default alias, found once (Django keeps one
    # wrapper per alias and thread for the thread's life; closing it keeps the wrapper).
    if using == "default":
        connection = getattr(_thread, "wrapper", None)
        if connection is None:
            connection = _thread.wrapper = connections[using]
    else:
        connection = connections[using]
    # A closed connection reopens with the process's default scope, whatever it was given.
    if connection.connection is not None and connection.__dict__.get(_TENANT) == organization_id:
        return
    set_scope(organization_id=organization_id, using=using)


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
    tenant, bypass = wanted
    set_scope(organization_id=uuid.UUID(tenant) if tenant else None, bypass=bypass, using=target)


def on_request_boundary(**kwargs: Any) -> None:
    """request_started / request_finished: never let a request inherit another's scope."""
    for alias in connections:
        reset_scope(alias)


class AdminBypassMiddleware:
    """The platform admin (staff under /admin/) sees every tenant: the bypass, per request."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        if request.path.startswith("/admin/") and getattr(request.user, "is_staff", False):
            set_scope(bypass=True)
        return self.get_response(request)
