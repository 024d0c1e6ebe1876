"""Server-side timeouts on every Django database connection, chosen by what the process is.

`settings.DATABASE_TIMEOUTS` holds, per role ("web", "worker"), the seconds of
`statement_timeout`, `lock_timeout` and `idle_in_transaction_session_timeout` (0 = none). They
travel as libpq `options` (`-c name=value`), so the server applies them when the connection
opens: no extra statement, and nothing a handler's `SET` could forget to undo. The settings give
every connection the web values; a worker command switches its process with
`use_database_timeouts("worker")`, and `migrate` lifts the statement timeout while it runs.
The flags themselves are built by core.timeout_options (which the settings module uses).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connections

from core import pooler
from core.timeout_options import TIMEOUTS, with_timeouts

__all__ = [
    "TIMEOUTS",
    "lift_statement_timeout_for_migrate",
    "restore_statement_timeout_after_migrate",
    "use_database_timeouts",
    "with_timeouts",
]


def use_database_timeouts(role: str) -> None:
    """From the next connection on, this process's Django connections get `role`'s timeouts.

    Call it first thing in a command's `handle()`, before its first transaction: an open
    connection is closed (it keeps the values it opened with), and Django opens a new one at
    the next query. `role` is a key of `settings.DATABASE_TIMEOUTS`.
    """
    pooler.use_role(role)
    timeouts = settings.DATABASE_TIMEOUTS[role]
    for connection in connections.all():
        if pooler.pooled(connection.alias):
            continue  # the prologue of each transaction sets them (core.pooler)
        options = connection.settings_dict.setdefault("OPTIONS", {})
        options["options"] = with_timeouts(options.get("options", ""), timeouts)
        connection.close()


def lift_statement_timeout_for_migrate(*, using: str, **kwargs: Any) -> None:
    """pre_migrate: no statement timeout while migrations run (an index build or a backfill may
    take long on a big table); the lock timeout stays, so a migration that cannot get its lock
    fails instead of holding every query queued behind it."""
    if pooler.pooled(using):
        return  # `migrate` runs on the direct server (core.pooler.DIRECT_COMMANDS)
    with connections[using].cursor() as cursor:
        cursor.execute("SET statement_timeout = 0")


def restore_statement_timeout_after_migrate(*, using: str, **kwargs: Any) -> None:
    """post_migrate: back to the value the connection opened with."""
    if pooler.pooled(using):
        return
    with connections[using].cursor() as cursor:
        cursor.execute("RESET statement_timeout")
