"""The Postgres dramatiq broker (dramatiq-postgres), made transactional and fail-fast.

`dramatiq_postgres.PostgresBroker` enqueues through its own connection pool and retries a failed
enqueue for minutes. Ours, when it uses the project's database (no `url`), writes the message
through Django's connection whenever the caller is inside `transaction.atomic()`, so the job
commits or rolls back with the caller's rows; outside a transaction it uses the pool, and a broker
that cannot be reached fails within `pool_timeout` seconds instead of blocking the relay.
"""

from __future__ import annotations

import functools
from typing import Any

import dramatiq_postgres
from django.db import connections
from dramatiq import Message
from dramatiq.common import current_millis, dq_name
from dramatiq_postgres.broker import QUERIES
from dramatiq_postgres.utils import make_pool, tidy4json
from psycopg.types.json import Json
from psycopg_pool import ConnectionPool

from deskcomm.db import conninfo

# The library's enqueue without its tenacity wrapper (10 tries, up to 30 s apart): the relay
# owns retries and backoff, in the database.
_enqueue_once = dramatiq_postgres.PostgresBroker.enqueue.__wrapped__


class PostgresBroker(dramatiq_postgres.PostgresBroker):
    """dramatiq-postgres on the Django database by default (see the module docstring)."""

    def __init__(
        self,
        *,
        url: str = "",
        database_alias: str = "default",
        pool_timeout: float = 5.0,
        **kwargs: Any,
    ) -> None:
        self.database_alias = database_alias
        self.transactional = not url
        pool = make_pool(url) if url else _django_pool(database_alias)
        pool.timeout = pool_timeout
        kwargs.setdefault("results", False)  # jobs record their outcome themselves
        super().__init__(pool=pool, **kwargs)
        self._owns_pool = True

    def enqueue(self, message: Message[Any], *, delay: int | None = None) -> Message[Any]:
        connection = connections[self.database_alias]
        if self.transactional and connection.in_atomic_block:
            return self._enqueue_in_transaction(message, delay)
        enqueued: Message[Any] = _enqueue_once(self, message, delay=delay)
        return enqueued

    def _enqueue_in_transaction(self, message: Message[Any], delay: int | None) -> Message[Any]:
        self.emit_before("enqueue", message, delay)
        if delay:
            message = message.copy(queue_name=dq_name(message.queue_name))
            message.options["eta"] = current_millis() + delay
        params: list[Any] = [
            message.queue_name,
            message.message_id,
            Json(tidy4json(message)),
            delay or 0,
        ]
        with connections[self.database_alias].cursor() as cursor:
            # NOTIFY inside the statement is delivered when the caller commits.
            cursor.execute(QUERIES.ENQUEUE if self.notify else QUERIES.ENQUEUE_QUIET, params)
        self.emit_after("enqueue", message, delay)
        return message


def _django_pool(alias: str) -> ConnectionPool:
    # The conninfo is resolved at each connect, so it follows Django's settings (the test
    # database under pytest) rather than freezing them when the broker is built at start-up.
    pool = make_pool("")
    pool.conninfo = functools.partial(conninfo, alias)
    return pool
