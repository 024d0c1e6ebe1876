"""The command line behind the README commands: `python3 -m dev test|run|manage|db|stop-db`."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from types import FrameType

from dev.bootstrap import REPO_ROOT, VENV_DIR, VENV_PYTHON, child_env, ensure_venv, venv_is_usable
from dev.bytecode import compile_project
from dev.console import DevError, say
from dev.foreground import run_foreground
from dev.launch import Launch, launch
from dev.postgres import CLUSTERS, PRODUCT, TESTS, Cluster, Database, ensure_database, stop_embedded
from dev.product import (
    DEFAULT_WEB_PORT,
    RUN_LOCK_FILE,
    WEB_HOST,
    manage_py,
    process_list,
    process_table,
    setup_commands,
)

USAGE = f"""usage: python3 -m dev COMMAND [ARGS...]

    test [pytest args...]   create/refresh .venv (with the test and lint tools), ensure a
                            database, run pytest
    run                     create/refresh .venv (the product's requirements only), migrate
                            (installs schedules), create demo data, then run these
                            side by side (web port: PORT, default {DEFAULT_WEB_PORT}):
{process_list(indent=28)}
                            a process that exits is restarted; Ctrl-C stops them all
    manage ARGS...          run manage.py ARGS with DATABASE_URL (and the roles' URLs) set
    db                      ensure the database and print DATABASE_URL=... and the roles' URLs
    stop-db                 stop the embedded PostgreSQL servers (the product's and the tests')"""


@contextlib.contextmanager
def prepared_database(
    cluster: Cluster = PRODUCT, requirements: str = "runtime"
) -> Iterator[Database]:
    """Ensure venv (the `requirements` set: "runtime" or "dev") + database; stop the embedded
    server afterwards if we started it."""
    ensure_venv(requirements)
    database = ensure_database(cluster)
    try:
        yield database
    finally:
        database.stop_if_started()


def database_env(database: Database) -> dict[str, str]:
    """The project processes' environment: DATABASE_URL (the owner) and the roles' URLs, each
    process connecting as the role its command picks (core.db_roles)."""
    return {**child_env(database.url), **database.role_urls}


# Parallel pytest workers per CPU: the suite mostly waits (subprocesses starting, a browser, a
# server), so two per core keep both busy; measured in docs/testing.md.
TEST_WORKERS_PER_CPU = 2


def pytest_args(args: list[str], cpus: int) -> list[str]:
    """The user's pytest arguments, run by parallel workers (pytest-xdist, a database each)
    unless they chose a number of workers (`-n 0`: one process) or a debugger."""
    chosen = any(
        a in {"-n", "--numprocesses"} or a.startswith(("-n", "--numprocesses=")) for a in args
    )
    serial = {"--pdb", "--trace", "no:xdist", "-pno:xdist"} & set(args)
    if serial:
        return args
    dist = [] if any(a.startswith("--dist") for a in args) else ["--dist", "loadgroup"]
    workers = [] if chosen else ["-n", str(max(2, TEST_WORKERS_PER_CPU * cpus))]
    return [*workers, *dist, *args]


def cmd_test(args: list[str]) -> int:
    """Run pytest with the given arguments."""
    with prepared_database(TESTS, requirements="dev") as database:
        compile_project()
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        argv = [str(VENV_PYTHON), "-m", "pytest", *pytest_args(args, cpus or 1)]
        # The suite creates and migrates its databases: it (and what it starts, unless a test
        # says otherwise) connects as the owner; the role tests use the roles' URLs.
        env = {**database_env(database), "DATABASE_ROLE": "owner"}
        return run_foreground(argv, env, REPO_ROOT)


def cmd_manage(args: list[str]) -> int:
    """Run manage.py with the given arguments."""
    if not args:
        raise DevError("usage: python3 -m dev manage COMMAND [ARGS...]")
    with prepared_database() as database:
        return run_foreground([*manage_py(), *args], database_env(database), REPO_ROOT)


def web_port() -> int:
    """$PORT, or the default web port."""
    port = os.environ.get("PORT", str(DEFAULT_WEB_PORT))
    if not port.isdigit():
        raise DevError(f"PORT must be a number, got {port!r}")
    return int(port)


@contextlib.contextmanager
def run_environment(port: int) -> Iterator[dict[str, str]]:
    """The environment of `run`'s setup steps and processes, with the database ready."""
    with prepared_database() as database:
        env = database_env(database)
        env["PORT"] = str(port)
        env["PYTHONUNBUFFERED"] = "1"
        env.setdefault("DEBUG", "true")  # a local run: runserver serves the admin's static files
        allow_loopback_webhooks(env)
        mock_ai_by_default(env)
        say_settings_source()
        yield env


def allow_loopback_webhooks(env: dict[str, str]) -> None:
    """A local run may subscribe webhooks to a receiver on this machine (unless set otherwise)."""
    if "WEBHOOKS_ALLOW_PRIVATE_TARGETS" in env:
        return
    env["WEBHOOKS_ALLOW_PRIVATE_TARGETS"] = "true"
    say(
        "webhook subscriptions may target loopback and private addresses in this local run "
        "(WEBHOOKS_ALLOW_PRIVATE_TARGETS=true; a deployment refuses them unless it sets it)"
    )


def say_settings_source() -> None:
    """One line on where the settings come from (Django reads `.env` quietly, when it exists)."""
    if (REPO_ROOT / ".env").is_file():
        say(f"settings: the environment, then {REPO_ROOT / '.env'}")
    else:
        say(
            "settings: the environment and the defaults, which suit a local run (no .env; "
            "copy .env.example to .env to change one)"
        )


def mock_ai_by_default(env: dict[str, str]) -> None:
    """A local run answers with the AI fixtures unless a model is configured (or MOCK_AI set)."""
    if "MOCK_AI" in env or env.get("AI_API_KEY"):
        return
    env["MOCK_AI"] = "true"
    say(
        "the AI workers answer with deterministic fixtures in this local run (MOCK_AI=true; "
        "set AI_API_KEY, or MOCK_AI=false, to use a model; production refuses MOCK_AI)"
    )


def cmd_run(args: list[str]) -> int:
    """Migrate, create the demo data, then supervise the processes until stopped."""
    if args:
        raise DevError("usage: python3 -m dev run (configure the web port with PORT=...)")
    port = web_port()
    plan = Launch(
        lock_path=RUN_LOCK_FILE,
        web_host=WEB_HOST,
        web_port=port,
        setup_steps=setup_commands(),
        programs=process_table(port),
        cwd=REPO_ROOT,
    )
    return launch(plan, lambda: run_environment(port))


def cmd_db(args: list[str]) -> int:
    """Ensure the database and print DATABASE_URL=... on stdout."""
    if args:
        raise DevError("usage: python3 -m dev db")
    ensure_venv("runtime")
    database = ensure_database(PRODUCT)
    if not os.environ.get("DATABASE_URL"):
        say("the embedded PostgreSQL keeps running; stop it with: python3 -m dev stop-db")
    print(f"DATABASE_URL={database.url}", flush=True)
    for name, url in database.role_urls.items():
        print(f"{name}={url}", flush=True)
    return 0


def cmd_stop_db(args: list[str]) -> int:
    """Stop the embedded server if it is running."""
    if args:
        raise DevError("usage: python3 -m dev stop-db")
    clusters = [cluster for cluster in CLUSTERS if cluster.exists()]
    if not clusters:
        say("no embedded PostgreSQL cluster here; nothing to stop")
        return 0
    if not venv_is_usable():
        raise DevError(f"{VENV_DIR} is missing, so the PostgreSQL binaries are unavailable.")
    for cluster in clusters:
        port = stop_embedded(cluster)
        name = cluster.root.name
        if port is None:
            say(f"the embedded PostgreSQL ({name}) is not running")
        else:
            say(f"stopped the embedded PostgreSQL ({name}, port {port})")
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
        return COMMANDS[args[0]](args[1:])
    except DevError as exc:
        say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        say("interrupted")
        return 130
