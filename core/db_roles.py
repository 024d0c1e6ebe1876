"""Which PostgreSQL role a process connects as: the owner, the worker or the web role.

The tenant wall (core.rls) holds because the bypass is not a setting anyone may use: every
tenant policy accepts `app.rls_bypass = on` only from a member of the group role
`deskcomm_platform` (PLATFORM_GROUP, a fixed name the policies spell out). So:

- **owner** (`DATABASE_URL`, `deskcomm` by default): owns the tables and runs the migrations
  (`migrate`, `partition_event_log`); a member of deskcomm_platform, so migrations and the
  SECURITY DEFINER functions it owns (the API key lookup) may bypass.
- **worker** (`DATABASE_WORKER_URL`): every other `manage.py` command (drain_events,
  deliver_webhooks, rundramatiq and its worker processes, run_scheduler, backup, ...), a member
  of deskcomm_platform and of deskcomm_app: the tables' rows, every tenant's.
- **web** (`DATABASE_WEB_URL`): gunicorn and runserver, a member of deskcomm_app only: rows
  (SELECT, INSERT, UPDATE, DELETE), sequences and the functions it calls, no CREATE, no way into
  deskcomm_platform. Its `app.rls_bypass` changes nothing; what a web process must read across
  tenants (the staff admin, /metrics, cron, the receivers' lookups) goes through the `platform`
  alias, a connection as the worker role (core.rls).

Each URL falls back to `DATABASE_URL`, so a single-role setup keeps working: the owner is then
every process's role, and the web one can lift the wall (system check deskcomm.W040 says so).
The group roles are created by the migration `core/0013_database_roles` (or by whoever sets up
the server: python3 -m dev, the compose files' `db-roles` service); the login roles and their
passwords by the deploy. docs/configuration.md "Database roles".

This module imports nothing from Django at load time: the settings module uses it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

OWNER = "owner"
WORKER = "worker"
WEB = "web"
ROLES = (OWNER, WORKER, WEB)

# Named by every tenant policy (the bypass needs membership) and by the migrations' grants.
PLATFORM_GROUP = "deskcomm_platform"
APP_GROUP = "deskcomm_app"  # the application's table privileges: web and worker are members
# The login roles' names where the deploy creates them (python3 -m dev, the compose files).
DEFAULT_LOGIN_ROLES = {OWNER: "deskcomm", WORKER: "deskcomm_worker", WEB: "deskcomm_web"}

# A web process's connections as the worker role, used while it serves platform work (core.rls).
PLATFORM_ALIAS = "platform"
PLATFORM_REPLICA_ALIAS = "platform_replica"  # the same on the read replica
PLATFORM_ALIASES = frozenset({PLATFORM_ALIAS, PLATFORM_REPLICA_ALIAS})

BYPASS_SETTING = "app.rls_bypass"
BYPASS_OPTION = f"-c {BYPASS_SETTING}=on"
PROCESS_BYPASS_ENV = "DB_RLS_BYPASS"

# manage.py commands that serve web requests: scoped per request, never bypassing as a whole.
WEB_COMMANDS = frozenset({"runserver", "testserver"})
# manage.py commands that change the schema: they connect as the tables' owner.
OWNER_COMMANDS = frozenset({"migrate", "partition_event_log"})


def managed_command(argv: Sequence[str]) -> str | None:
    """The command of a `manage.py` / `django-admin` argv ("" without one), None otherwise."""
    if os.path.basename(argv[0] if argv else "") not in ("manage.py", "django-admin"):
        return None
    return argv[1] if len(argv) > 1 else ""


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def process_role(argv: Sequence[str], env: Mapping[str, str], explicit: str = "") -> str:
    """The role this process connects as: `explicit` (DATABASE_ROLE) when given; else the owner
    for the schema commands, the web role for the web servers (and for anything that is not a
    manage.py command, unless DB_RLS_BYPASS marks it a platform process, e.g. rundramatiq's
    worker processes), the worker role for every other manage.py command."""
    explicit = explicit.strip().lower()
    if explicit:
        if explicit not in ROLES:
            raise ValueError(f"DATABASE_ROLE must be one of {', '.join(ROLES)}, not {explicit!r}")
        return explicit
    command = managed_command(argv)
    if command in OWNER_COMMANDS:
        return OWNER
    if command is not None and command not in WEB_COMMANDS and command:
        return WORKER
    if command is None and truthy(env.get(PROCESS_BYPASS_ENV)):
        return WORKER
    return WEB


def role_url(role: str, *, owner: str, worker: str, web: str) -> str:
    """The URL `role` connects with: its own, else the owner's (DATABASE_URL)."""
    return {OWNER: owner, WORKER: worker or owner, WEB: web or owner}[role]


def platform_database(platform: dict[str, Any], web: dict[str, Any]) -> dict[str, Any]:
    """A web process's `platform` alias: the worker role's server and credentials, the web
    connection's session options (timeouts) plus the bypass at startup, and its reuse."""
    options = {**web.get("OPTIONS", {}), **platform.get("OPTIONS", {})}
    current = str(options.get("options", ""))
    if BYPASS_OPTION not in current:
        options["options"] = f"{current} {BYPASS_OPTION}".strip()
    return {
        **platform,
        "OPTIONS": options,
        "CONN_MAX_AGE": web.get("CONN_MAX_AGE", 0),
        "CONN_HEALTH_CHECKS": web.get("CONN_HEALTH_CHECKS", False),
        "TEST": {"MIRROR": "default"},
    }


def same_login(one: dict[str, Any], other: dict[str, Any]) -> bool:
    """Whether two database settings connect to the same server as the same user."""
    keys = ("HOST", "PORT", "NAME", "USER")
    return all(str(one.get(key) or "") == str(other.get(key) or "") for key in keys)
