"""The embedded PostgreSQL server the suite runs on, for tests that restart it for real."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection

from dev import postgres
from tests.support import parallel

# A fast shutdown ends with a checkpoint; on a disk another program keeps busy it has been seen
# to outlast pg_ctl's 60 s (a test run beside a 10M-event seeding): checkpoint first, wait longer.
RESTART_TIMEOUT = 300


@dataclass(frozen=True)
class EmbeddedServer:
    """`python3 -m dev test`'s own server (.pgdata-test/), restarted with its own pg_ctl."""

    runner: postgres.PgRunner
    port: int

    def restart(self) -> None:
        """`pg_ctl restart -m fast`: every connection is cut; returns once it accepts again.

        A restart that fails still leaves the server running, so the tests after it have one.
        Under xdist only an exclusive test may restart it (tests/support/parallel.py)."""
        if not parallel.alone_on_the_server():
            raise AssertionError(
                "restarting the shared server cuts the other workers' connections: mark the "
                "test @pytest.mark.exclusive (docs/testing.md)"
            )
        superuser = postgres.connection_args(self.port)
        self.runner.client("psql", *superuser, "-c", "CHECKPOINT")  # the shutdown's is short then
        args = ["-D", str(postgres.TESTS.data), "-m", "fast", "-w", "-t", str(RESTART_TIMEOUT)]
        result = self.runner.run("pg_ctl", *args, "restart")
        if result.returncode != 0:
            if postgres.running_port(self.runner) is None:
                postgres.start_server(self.runner, self.port)
            failed = f"pg_ctl restart failed (exit code {result.returncode})"
            raise postgres.pg_failure(postgres.TESTS, failed)


def embedded_test_server() -> EmbeddedServer | None:
    """The embedded server when the tests run on it (None when DATABASE_URL is another)."""
    port_file = postgres.TESTS.port_file
    if not port_file.is_file():
        return None
    try:
        embedded_port = int(port_file.read_text().strip())
    except ValueError:
        return None
    if int(connection.settings_dict.get("PORT") or 5432) != embedded_port:
        return None
    return EmbeddedServer(postgres.make_runner(postgres.TESTS), embedded_port)


def reset_pools(broker: Any) -> None:
    """Replace the job broker's pooled connections that a restart broke."""
    pool = getattr(broker, "pool", None)
    if pool is not None and hasattr(pool, "check"):
        pool.check()
