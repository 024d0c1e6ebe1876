"""The embedded PostgreSQL server the suite runs on, for tests that restart it for real."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from deskcomm import dev


@dataclass(frozen=True)
class EmbeddedServer:
    """`python3 -m deskcomm.dev`'s own server (.pgdata/), restarted with its own pg_ctl."""

    runner: dev.PgRunner

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every connection is cut; returns once it accepts again."""
        args = ["-D", str(dev.CLUSTER_DIR), "-m", "fast", "-w", "-t", str(dev.PG_TIMEOUT)]
        result = self.runner.run("pg_ctl", *args, "restart")
        if result.returncode != 0:
            raise dev.pg_failure(f"pg_ctl restart failed (exit code {result.returncode})")


def embedded_test_server() -> EmbeddedServer | None:
    """The embedded server when the tests run on it (None when DATABASE_URL is another)."""
    if not dev.PORT_FILE.is_file():
        return None
    try:
        embedded_port = int(dev.PORT_FILE.read_text().strip())
    except ValueError:
        return None
    if int(connection.settings_dict.get("PORT") or 5432) != embedded_port:
        return None
    return EmbeddedServer(dev.make_runner())


def reset_pools(broker: Any) -> None:
    """Replace the job broker's pooled connections that a restart broke."""
    pool = getattr(broker, "pool", None)
    if pool is not None and hasattr(pool, "check"):
        pool.check()
