"""The embedded PostgreSQL server the suite runs on, for tests that restart it for real."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from dev import postgres


@dataclass(frozen=True)
class EmbeddedServer:
    """`python3 -m dev`'s own server (.pgdata/), restarted with its own pg_ctl."""

    runner: postgres.PgRunner

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every connection is cut; returns once it accepts again."""
        args = ["-D", str(postgres.CLUSTER_DIR), "-m", "fast", "-w", "-t", str(postgres.PG_TIMEOUT)]
        result = self.runner.run("pg_ctl", *args, "restart")
        if result.returncode != 0:
            raise postgres.pg_failure(f"pg_ctl restart failed (exit code {result.returncode})")


def embedded_test_server() -> EmbeddedServer | None:
    """The embedded server when the tests run on it (None when DATABASE_URL is another)."""
    if not postgres.PORT_FILE.is_file():
        return None
    try:
        embedded_port = int(postgres.PORT_FILE.read_text().strip())
    except ValueError:
        return None
    if int(connection.settings_dict.get("PORT") or 5432) != embedded_port:
        return None
    return EmbeddedServer(postgres.make_runner())


def reset_pools(broker: Any) -> None:
    """Replace the job broker's pooled connections that a restart broke."""
    pool = getattr(broker, "pool", None)
    if pool is not None and hasattr(pool, "check"):
        pool.check()
