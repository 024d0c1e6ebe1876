"""A real PgBouncer (Debian's package) in transaction pooling mode on a free loopback port, in
front of the test server: its config in a temporary directory, `auth_type = trust` with an auth
file naming the test role (and the password PgBouncer uses to log in to the server)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from core.db_roles import WEB, WORKER
from tests.support.roles import login
from tests.support.waiting import wait_for

BINARIES = ("pgbouncer", "/usr/sbin/pgbouncer")

CONFIG = """\
[databases]
* = host={host} port={port}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = trust
auth_file = {auth_file}
admin_users = {user}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 200
server_reset_query =
"""


def pgbouncer_binary() -> str:
    """The pgbouncer binary; missing, a skip locally and a failure under CI=true (.ci/run
    installs the package)."""
    for candidate in BINARIES:
        found = shutil.which(candidate)
        if found:
            return found
    message = "pgbouncer is not installed (apt-get install pgbouncer)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PgBouncer:
    port: int
    process: subprocess.Popen[bytes]
    log: Path
    user: str

    def url(self, dbname: str, *, user: str = "") -> str:
        return f"postgres://{user or self.user}@127.0.0.1:{self.port}/{dbname}"

    def connect(self, dbname: str) -> psycopg.Connection[Any]:
        """A client connection through the pooler (no startup options: PgBouncer refuses them)."""
        return psycopg.connect(self.url(dbname), autocommit=True, options="")

    def show(self, what: str) -> list[dict[str, Any]]:
        """`SHOW <what>` on PgBouncer's admin console (simple query protocol only)."""
        from psycopg.rows import dict_row

        with psycopg.connect(
            self.url("pgbouncer"), autocommit=True, options="", cursor_factory=psycopg.ClientCursor
        ) as admin:
            return list(admin.cursor(row_factory=dict_row).execute(f"SHOW {what}"))

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def running_pgbouncer(*, pool_size: int = 2) -> Iterator[PgBouncer]:
    """PgBouncer in front of the test database's server; stopped (SIGTERM) at the end."""
    binary = pgbouncer_binary()
    s = connection.settings_dict
    user = str(s["USER"])
    with tempfile.TemporaryDirectory(prefix="pgbouncer-") as directory:
        root = Path(directory)
        root.chmod(0o755)  # run as root, PgBouncer drops to `nobody`, which must read these
        auth_file = root / "users.txt"
        # The test role, and the web and worker roles a web process connects as (core.db_roles).
        logins = {user: str(s.get("PASSWORD") or ""), **dict([login(WEB), login(WORKER)])}
        auth_file.write_text("".join(f'"{name}" "{secret}"\n' for name, secret in logins.items()))
        port = free_port()
        config = root / "pgbouncer.ini"
        config.write_text(
            CONFIG.format(
                host=s["HOST"] or "127.0.0.1",
                port=s["PORT"] or 5432,
                listen_port=port,
                auth_file=auth_file,
                user=user,
                pool_size=pool_size,
            )
        )
        for path in (auth_file, config):
            path.chmod(0o644)
        log = root / "pgbouncer.log"
        as_user = ["-u", "nobody"] if os.geteuid() == 0 else []
        with log.open("wb") as sink:
            process = subprocess.Popen(
                [binary, *as_user, str(config)], stdout=sink, stderr=subprocess.STDOUT
            )
        bouncer = PgBouncer(port=port, process=process, log=log, user=user)
        try:
            _wait_until_accepting(bouncer, str(s["NAME"]))
            yield bouncer
        finally:
            process.terminate()
            process.wait(timeout=10)


def _wait_until_accepting(bouncer: PgBouncer, dbname: str) -> None:
    def accepting() -> bool:
        if bouncer.process.poll() is not None:
            raise RuntimeError(f"pgbouncer exited: {bouncer.output()}")
        try:
            with bouncer.connect(dbname) as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    wait_for(accepting, timeout=15, what=bouncer.output)
