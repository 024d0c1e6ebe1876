"""Transaction-mode connection pooling (PgBouncer `pool_mode = transaction`).

With `DATABASE_POOLER=transaction`, DATABASE_URL names the pooler: each transaction of a Django
connection may run on a different server session, and the session a transaction leaves behind
goes to the next client. So nothing may rely on session state, and this module replaces each
session-level setting the project used with a per-transaction one:

- **The prologue.** Every transaction of a Django connection starts with one statement that sets,
  with `set_config(..., true)` (transaction-local), the row-level security scope (`app.
  organization_id`, `app.tenant_proof`, `app.rls_bypass`: core.rls) and the process role's timeouts
  (`statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`: core.db_timeouts).
  They end with the transaction, so a server session never carries a tenant's scope into another
  client's transaction, and no startup `options` are needed (PgBouncer refuses them).
- **Autocommit statements** (Django's default outside `transaction.atomic()`) each run in a
  transaction of their own that opens with the prologue: three more round trips than a bare
  statement, the price of a scope that cannot leak. Server-side cursors are off (Django's
  DISABLE_SERVER_SIDE_CURSORS: `.iterator()` would hold a cursor across transactions).
- **Prepared statements:** the installed PgBouncer (Debian's 1.18 at the time of writing) does
  not track protocol-level prepared statements (1.21+ does, with `max_prepared_statements`), so
  the pooled connections prepare nothing (core.db: emit's `prepare=True` is ignored).
- **What needs a session** — the LISTEN wake-up connection, the scheduler's leader lock, the
  WhatsApp sender's per-message lock, the worker registry, the Postgres job broker's pool — uses
  `core.db.conninfo()`, which names DATABASE_DIRECT_URL's server when it is set, and commands that
  need one whole session (`migrate`, `backup`, `restore_check`, `dbshell`) run their Django
  connection on it too (`select_for_process`).

System check deskcomm.E101 refuses the pooler without DATABASE_DIRECT_URL; docs/configuration.md
"PgBouncer".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import pq

from core.db_roles import PLATFORM_ALIAS
from core.timeout_options import TIMEOUTS, with_timeouts

TRANSACTION = "transaction"
POOLED_ALIAS = "default"  # the database DATABASE_URL names
# Commands whose Django connection needs a whole session: non-atomic migrations (CREATE INDEX
# CONCURRENTLY cannot run in a transaction block), pg_dump's snapshot, an interactive shell.
DIRECT_COMMANDS = frozenset({"migrate", "backup", "restore_check", "dbshell"})

PROLOGUE_SQL = (
    "SELECT set_config('app.organization_id', %s, true), set_config('app.tenant_proof', %s, true),"
    " set_config('app.rls_bypass', %s, true),"
    " set_config('statement_timeout', %s, true), set_config('lock_timeout', %s, true),"
    " set_config('idle_in_transaction_session_timeout', %s, true)"
)
# On a connection wrapper: (tenant, bypass, proof) set by core.rls.
_SCOPE = "_deskcomm_pooled_scope"
_state: dict[str, Any] = {
    "direct": False,
    "role": "web",
    "default_bypass": lambda connection: False,  # core.rls's rule once it is loaded
}


def configured() -> bool:
    """DATABASE_POOLER says DATABASE_URL is a transaction-mode pooler."""
    return str(getattr(settings, "DATABASE_POOLER", "") or "").lower() == TRANSACTION


def pooled(alias: str = "default") -> bool:
    """This process's connections of Django database `alias` go through the transaction pooler
    (the process's own and, in a web process, the platform one as the worker role: other
    aliases, e.g. a read replica, connect as they are configured)."""
    if alias == PLATFORM_ALIAS:
        return configured()
    return alias == POOLED_ALIAS and configured() and not _state["direct"]


def direct_params() -> dict[str, str]:
    """Host, port, user and password of DATABASE_DIRECT_URL ({} when unset); the database name
    stays Django's, so PgBouncer's entry must carry the server database's name."""
    url = str(getattr(settings, "DATABASE_DIRECT_URL", "") or "")
    if not url:
        return {}
    parts = urlsplit(url)
    params = {
        "host": parts.hostname or "",
        "port": str(parts.port or ""),
        "user": unquote(parts.username or ""),
        "password": unquote(parts.password or ""),
    }
    return {name: value for name, value in params.items() if value}


# -- start-up ---------------------------------------------------------------------------------


def select_for_process(argv: Sequence[str]) -> None:
    """At start-up (before core.rls): a session command runs on the direct server."""
    command = argv[1] if len(argv) > 1 else ""
    if configured() and command in DIRECT_COMMANDS and direct_params():
        go_direct()


def go_direct() -> None:
    """This process's Django connections use DATABASE_DIRECT_URL's server, with the startup
    options (timeouts, bypass) a direct connection takes."""
    _state["direct"] = True
    settings_dict = connections[POOLED_ALIAS].settings_dict
    settings_dict.update({name.upper(): value for name, value in direct_params().items()})
    options = settings_dict.setdefault("OPTIONS", {})
    options["options"] = with_timeouts("", settings.DATABASE_TIMEOUTS[_state["role"]])
    connections[POOLED_ALIAS].close()


def use_role(role: str) -> None:
    """Pooled: the prologue sets `role`'s timeouts (core.db_timeouts.use_database_timeouts)."""
    _state["role"] = role


def install(*, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """connection_created: every query of a pooled connection goes through `run_in_transaction`."""
    if pooled(connection.alias) and run_in_transaction not in connection.execute_wrappers:
        connection.execute_wrappers.append(run_in_transaction)


# -- the prologue -----------------------------------------------------------------------------


def remember_scope(
    connection: BaseDatabaseWrapper, tenant: str | None, bypass: bool, proof: str = ""
) -> None:
    """core.rls: the scope of this connection's next transactions (None: the process default);
    applied at once to a transaction already open."""
    if tenant is None:
        connection.__dict__.pop(_SCOPE, None)
    else:
        connection.__dict__[_SCOPE] = (tenant, bypass, proof)
    raw = connection.connection
    if raw is not None and raw.info.transaction_status == pq.TransactionStatus.INTRANS:
        raw.execute(PROLOGUE_SQL, prologue_params(connection))


def use_default_bypass(rule: Callable[[BaseDatabaseWrapper], bool]) -> None:
    """core.rls installs its rule here when it loads: whether a connection nothing scoped
    bypasses row-level security. Until then none does (the safe answer)."""
    _state["default_bypass"] = rule


def prologue_params(connection: BaseDatabaseWrapper) -> list[str]:
    default = ("", _state["default_bypass"](connection), "")
    tenant, bypass, proof = connection.__dict__.get(_SCOPE, default)
    timeouts: Mapping[str, float] = settings.DATABASE_TIMEOUTS[_state["role"]]
    milliseconds = [str(round(timeouts[name] * 1000)) for name in TIMEOUTS]
    return [tenant, proof, "on" if bypass else "off", *milliseconds]


def begin(connection: BaseDatabaseWrapper) -> None:
    """Inside `atomic()`, before the transaction's first statement: open it with the prologue."""
    raw = connection.connection
    if raw is not None and raw.info.transaction_status == pq.TransactionStatus.IDLE:
        raw.execute(PROLOGUE_SQL, prologue_params(connection))


def run_in_transaction(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Mapping[str, Any]
) -> Any:
    """Django execute wrapper: the statement runs in a transaction that began with the prologue."""
    connection = context["connection"]
    if connection.in_atomic_block:
        begin(connection)
        return execute(sql, params, many, context)
    with transaction.atomic(using=connection.alias):
        begin(connection)
        return execute(sql, params, many, context)
