"""The Postgres dramatiq broker (dramatiq-postgres), made transactional and fail-fast.

`dramatiq_postgres.PostgresBroker` enqueues through its own connection pool and retries a failed
enqueue (and each connection attempt) for minutes. Ours, when it uses the project's database (no
`url`), writes the message through Django's connection whenever the caller is inside
`transaction.atomic()`, so the job commits or rolls back with the caller's rows; outside a
transaction it uses the pool, and a broker that cannot be reached fails within `pool_timeout`
seconds instead of blocking the relay.

Connections: each queue (and its delay queue) holds one while consuming, each worker thread takes
one to ack, plus one LISTEN connection; the pool allows 32 (`?maxconn=` in a `url` changes it).
They are sessions of their own, so behind a transaction-mode pooler the pool connects to
DATABASE_DIRECT_URL (`core.db.conninfo`, core.pooler).
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
from typing import TYPE_CHECKING, Any

import dramatiq
import dramatiq_postgres
from django.db import connections
from dramatiq import Message
from dramatiq.common import current_millis, dq_name
from dramatiq_postgres.broker import QUERIES
from dramatiq_postgres.utils import make_pool, tidy4json
from psycopg.types.json import Json
from psycopg_pool import ConnectionPool

from core.db import conninfo

if TYPE_CHECKING:
    from core.workers import Presence, Sample


class PostgresBroker(dramatiq_postgres.PostgresBroker):
    """dramatiq-postgres on the Django database by default (see the module docstring)."""

    def __init__(
        self,
        *,
        url: str = "",
        database_alias: str = "default",
        pool_timeout: float = 5.0,  # seconds to wait for a connection before failing
        **kwargs: Any,
    ) -> None:
        self.database_alias = database_alias
        self.transactional = not url
        pool = make_pool(url, maxconn=32) if url else _django_pool(database_alias)
        pool.timeout = pool_timeout
        kwargs.setdefault("results", False)  # jobs record their outcome themselves
        super().__init__(pool=pool, **kwargs)
        self._owns_pool = True

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        """Insert the message: in the caller's transaction when there is one on our database,
        else through the pool, failing after `pool_timeout` (the library retries for minutes;
        the relay owns retries and backoff, in the database)."""
        self.emit_before("enqueue", message, delay)
        if delay:
            message = message.copy(queue_name=dq_name(message.queue_name))
            message.options["eta"] = current_millis() + delay
        sql = QUERIES.ENQUEUE if self.notify else QUERIES.ENQUEUE_QUIET
        params: list[Any] = [
            message.queue_name,
            message.message_id,
            Json(tidy4json(message)),
            delay or 0,
        ]
        connection = connections[self.database_alias]
        if self.transactional and connection.in_atomic_block:
            # NOTIFY inside the statement is delivered when the caller commits.
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
        else:
            with self.pool.connection() as conn, conn.transaction():
                conn.execute(sql, params)
        self.emit_after("enqueue", message, delay)
        return message


def _django_pool(alias: str) -> ConnectionPool:
    # The conninfo is resolved at each connect, so it follows Django's settings (the test
    # database under pytest) rather than freezing them when the broker is built at start-up.
    pool = make_pool("", maxconn=32)
    pool.conninfo = functools.partial(conninfo, alias)
    return pool


class WorkerDatabaseTimeouts(dramatiq.Middleware):
    """The jobs process's worker processes get the worker database timeouts (they run consumers
    and jobs, not requests). Only a dramatiq worker process boots middleware; the web enqueues."""

    def after_process_boot(self, broker: dramatiq.Broker) -> None:
        from core.db_timeouts import use_database_timeouts

        use_database_timeouts("worker")


class WorkerPresence(dramatiq.Middleware):
    """Each worker process of `rundramatiq` in the worker registry (core/workers.py): its
    threads, the messages running, when it last took one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0
        self._last_taken: dt.datetime | None = None
        self._presence: Presence | None = None

    def after_worker_boot(self, broker: dramatiq.Broker, worker: Any) -> None:
        from core.workers import Presence  # needs the apps loaded; this module is imported early

        threads = int(getattr(worker, "worker_threads", 1))
        self._presence = Presence(
            kind="rundramatiq", concurrency=threads, pumps="jobs", sample=self._sample
        )
        self._presence.start()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: Any) -> None:
        if self._presence is not None:
            self._presence.stop()

    def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
        with self._lock:
            self._running += 1
            self._last_taken = dt.datetime.now(dt.UTC)

    def after_process_message(
        self, broker: dramatiq.Broker, message: Any, *, result: Any = None, exception: Any = None
    ) -> None:
        with self._lock:
            self._running = max(0, self._running - 1)

    after_skip_message = after_process_message

    def _sample(self) -> Sample:
        from core.workers import Sample

        with self._lock:
            return Sample(in_flight=self._running, last_claim_at=self._last_taken)
