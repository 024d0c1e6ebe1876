"""Database helpers: libpq connection strings for connections Django does not manage (LISTEN,
locks, brokers), a server-side-binding cursor on Django's connection for the hot path, and
dropping a scratch database."""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, Self

import psycopg
from django.db import connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from psycopg import postgres, pq, sql
from psycopg.abc import Loader
from psycopg.conninfo import make_conninfo
from psycopg.rows import tuple_row

from core import pooler


def _compiled_timestamptz_loader() -> type[Loader]:
    loader = postgres.adapters.get_loader(postgres.types["timestamptz"].oid, pq.Format.TEXT)
    assert loader is not None  # psycopg always has one
    return loader


_TIMESTAMPTZ_LOADER = _compiled_timestamptz_loader()
# Django opens its connections with prepared statements off (`prepare_threshold` None), which
# also makes psycopg ignore `execute(..., prepare=True)`; its own cursors bind on the client and
# never prepare whatever the threshold. So the threshold is set out of reach: nothing is
# prepared automatically, and a bound-cursor statement is prepared only when its caller asks.
# emit() asks: planning emit_insert_one took ~0.8 ms, running it ~0.2 ms. The claim and the ack
# do not: their generic plans (array and LIMIT parameters) measured slower than planning each
# call. A prepared statement costs one extra round trip on its first use on a connection, and
# psycopg forgets them all on a rollback (DEALLOCATE ALL).
PREPARE_ONLY_WHEN_ASKED = 2**62
_IDLE_CURSOR = "_deskcomm_bound_cursor"  # on a connection wrapper: its idle bound cursor


def conninfo(alias: str = "default") -> str:
    """The conninfo of Django database `alias`, read now (the test database under pytest), for
    a connection that needs a session of its own: DATABASE_DIRECT_URL's server when it is set
    (past a transaction-mode pooler: core.pooler), Django's otherwise."""
    settings_dict = connections[alias].settings_dict
    params = {
        "dbname": settings_dict["NAME"],
        "user": settings_dict.get("USER"),
        "password": settings_dict.get("PASSWORD"),
        "host": settings_dict.get("HOST"),
        "port": settings_dict.get("PORT"),
    }
    params.update(pooler.direct_params())
    return make_conninfo(**{k: str(v) for k, v in params.items() if v})


class _Cursor(psycopg.Cursor[Any]):
    """A server-side-binding cursor that logs its statements where Django logs its own
    (`connection.queries`, when DEBUG or `CaptureQueriesContext` asks for them)."""

    _django: BaseDatabaseWrapper | None = None

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Self:
        django = self._django
        if django is None or not django.queries_logged:
            return super().execute(query, params, **kwargs)
        started = time.monotonic()
        try:
            return super().execute(query, params, **kwargs)
        finally:
            django.queries_log.append(
                {"sql": str(query), "time": f"{time.monotonic() - started:.3f}"}
            )


def _cursor(connection: BaseDatabaseWrapper) -> _Cursor:
    _check(connection)
    cursor = _Cursor(connection.connection)
    cursor._django = connection
    # psycopg's own (compiled) timestamptz loader instead of Django's Python subclass: the
    # session time zone is UTC (Django sets it), so the values are the same aware datetimes.
    cursor.adapters.register_loader("timestamptz", _TIMESTAMPTZ_LOADER)
    return cursor


def _check(connection: BaseDatabaseWrapper) -> None:
    # What Django checks before handing out a cursor: this thread's connection, and no query
    # after an error inside an atomic block (TransactionManagementError, not a server error).
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()
    if pooler.pooled(connection.alias):
        pooler.begin(connection)  # no-op outside atomic(): bound_cursor opens one
        return  # PgBouncer 1.18 does not track prepared statements: prepare nothing
    if connection.connection.prepare_threshold is None:
        connection.connection.prepare_threshold = PREPARE_ONLY_WHEN_ASKED


def _take_cursor(connection: BaseDatabaseWrapper) -> _Cursor:
    """The connection's idle bound cursor, or a new one (the first, or one used nested)."""
    cursor: _Cursor | None = connection.__dict__.pop(_IDLE_CURSOR, None)
    if cursor is None or cursor.closed or cursor.connection is not connection.connection:
        return _cursor(connection)
    _check(connection)
    cursor.row_factory = tuple_row  # whatever the last user chose
    return cursor


def _give_back(connection: BaseDatabaseWrapper, cursor: _Cursor) -> None:
    if cursor.closed or _IDLE_CURSOR in connection.__dict__:
        cursor.close()
    else:
        connection.__dict__[_IDLE_CURSOR] = cursor


@contextmanager
def bound_cursor(alias: str = "default") -> Iterator[psycopg.Cursor[Any]]:
    """A psycopg cursor with server-side parameter binding on Django's own connection.

    Django's cursors bind parameters on the client (`ClientCursor`): each value is rendered into
    the SQL text, and a list becomes an array literal with every element quoted and escaped.
    The hot-path statements (bulk emit, claim, ack) pass arrays of thousands of values, so they
    use this cursor instead and send the arrays as binary parameters (`%(name)b`). It runs in
    the caller's transaction; errors come out as `django.db` errors, as from
    `connection.cursor()`, and statements are logged like Django's.

    The cursor is the connection's own, handed out again after each block (a block nested in
    another gets a new one): a new psycopg cursor starts with empty adapter caches, and finding
    every parameter's dumper again cost each `emit()` as much as the server took to run it.
    """
    connection = connections[alias]
    connection.ensure_connection()
    with _pooled_transaction(connection), connection.wrap_database_errors:
        cursor = _take_cursor(connection)
        try:
            yield cursor
        finally:
            _give_back(connection, cursor)


@contextmanager
def pipeline(alias: str = "default") -> Iterator[Callable[[], psycopg.Cursor[Any]]]:
    """Pipeline mode on Django's connection: statements are sent without waiting for results.

    Yields a factory of server-side-binding cursors (as `bound_cursor`); each statement executed
    on one is sent at once, and its rows can be read from that cursor after the block (when
    every result has arrived). Meanwhile this process goes on preparing the next statement
    while the server runs the previous one. Run it inside `transaction.atomic()` when the
    statements belong together: after an error the server skips the rest of the pipeline.
    """
    connection = connections[alias]
    connection.ensure_connection()
    with _pooled_transaction(connection), connection.wrap_database_errors:
        if pooler.pooled(alias):
            pooler.begin(connection)  # before pipeline mode, so it runs once
        with connection.connection.pipeline():
            yield lambda: _cursor(connection)


def _pooled_transaction(connection: BaseDatabaseWrapper) -> AbstractContextManager[Any]:
    """Past a transaction-mode pooler, a block outside `atomic()` becomes one transaction, so
    its statements run under the prologue's scope and timeouts (core.pooler)."""
    if pooler.pooled(connection.alias) and not connection.in_atomic_block:
        return transaction.atomic(using=connection.alias)
    return nullcontext()


def skip_health_check_when_quiet(**kwargs: Any) -> None:
    """request_started and request_finished (after Django's own handler): no health check for a
    known-good connection.

    With CONN_HEALTH_CHECKS Django sends `SELECT 1` before the first query of every request on a
    reused connection: a round trip per request, and one more at its end (request_finished runs
    close_old_connections too, and the tenant scope's reset, core.rls, is then a first query).
    A connection the server has ended (restart, `pg_terminate_backend`, an idle timeout) has
    something to read, its FATAL message or the end of the stream, while a healthy idle one has
    nothing; so the check is skipped when the last request left no error and the socket is
    quiet, and still runs otherwise.
    """
    for wrapper in connections.all(initialized_only=True):
        checked = getattr(wrapper, "health_check_done", True)
        due = wrapper.settings_dict.get("CONN_HEALTH_CHECKS") and not checked
        if due and wrapper.connection is not None and not wrapper.errors_occurred:
            wrapper.health_check_done = _quiet(wrapper.connection)  # type: ignore[attr-defined]


def _quiet(conn: psycopg.Connection[Any]) -> bool:
    if conn.closed or conn.pgconn.status != pq.ConnStatus.OK:
        return False
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    return not readable


def drop_database(conn: psycopg.Connection[Any], name: str) -> None:
    """`DROP DATABASE IF EXISTS name` on an autocommit connection, ending what still uses it.

    The client sessions in it that this role may end are terminated first (waiting up to 5 s
    for each to exit); then a plain DROP, which stops autovacuum workers in that database itself.
    Not `WITH (FORCE)`: a role without superuser or `pg_signal_backend` is refused permission to
    terminate an autovacuum worker, and autovacuum visits every new or freshly migrated
    database, so FORCE fails whenever it happens to be there.
    """
    conn.execute(TERMINATE_SESSIONS_SQL, {"name": name})
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))


TERMINATE_SESSIONS_SQL = """
SELECT pg_terminate_backend(pid, 5000)
  FROM pg_stat_activity
 WHERE datname = %(name)s AND backend_type = 'client backend' AND pid <> pg_backend_pid()
   AND pg_has_role(usesysid, 'USAGE')
"""
