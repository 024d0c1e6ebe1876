"""System checks for DATABASE_REPLICA_URL: a replica that is the primary, bad knobs, and (with
`--database`, as `migrate` runs them) a replica that is unreachable or not a standby."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register
from django.db import DatabaseError, connections

from core.checks import PROJECT_TAG
from core.replica.conf import ALIAS, PRIMARY, configured, replica_settings
from core.replica.lag import first_line

ROUTER = "core.replica.routing.ReplicaRouter"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", ""})
HINT = (
    "DATABASE_REPLICA_URL must name a streaming standby of the primary "
    "(docs/configuration.md: Read replica)."
)


@register(PROJECT_TAG)
def check_replica_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E030 the replica is the primary; E031 bad knobs; W032 no router."""
    if not configured():
        return []
    problems: list[CheckMessage] = []
    if _server_and_database(ALIAS) == _server_and_database(PRIMARY):
        problems.append(
            Error(
                "DATABASE_REPLICA_URL names the primary's server and database: reads would not "
                "be offloaded, and the lag guard would measure the primary against itself.",
                hint=HINT,
                id="deskcomm.E030",
            )
        )
    problems += _knob_errors()
    if ROUTER not in settings.DATABASE_ROUTERS:
        problems.append(
            Warning(
                f"the {ALIAS!r} database is configured but DATABASE_ROUTERS lacks {ROUTER}: "
                "nothing reads the replica.",
                hint="Configure the replica through DATABASE_REPLICA_URL (deskcomm/settings.py).",
                id="deskcomm.W032",
            )
        )
    return problems


@register(Tags.database)
def check_replica_server(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """deskcomm.W030 unreachable, W031 not a standby (warnings: reads fall back meanwhile)."""
    if not configured() or not databases:
        return []
    try:
        with connections[ALIAS].cursor() as cursor:
            cursor.execute("SELECT pg_is_in_recovery()")
            [standby] = cursor.fetchone()
    except DatabaseError as error:
        message = f"the read replica is unreachable ({first_line(error)}); reads use the primary."
        return [Warning(message, hint=HINT, id="deskcomm.W030")]
    if standby:
        return []
    message = (
        "the read replica is not a standby (pg_is_in_recovery() is false); reads use the primary."
    )
    return [Warning(message, hint=HINT, id="deskcomm.W031")]


def _server_and_database(alias: str) -> tuple[str, str, str]:
    config = settings.DATABASES[alias]
    host = str(config.get("HOST") or "").lower()
    host = "localhost" if host in LOOPBACK_NAMES else host
    return host, str(config.get("PORT") or 5432), str(config.get("NAME") or "")


def _knob_errors() -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    if replica_settings.MAX_LAG <= 0:
        errors.append(_knob_error("DATABASE_REPLICA_MAX_LAG", "more than 0"))
    if replica_settings.CHECK_INTERVAL < 0:
        errors.append(_knob_error("DATABASE_REPLICA_CHECK_INTERVAL", "0 or more"))
    if replica_settings.PRIMARY_AFTER_WRITE_SECONDS < 0:
        errors.append(_knob_error("DATABASE_REPLICA_PRIMARY_AFTER_WRITE", "0 or more"))
    return errors


def _knob_error(name: str, allowed: str) -> Error:
    return Error(f"{name} must be {allowed} seconds.", hint=HINT, id="deskcomm.E031")
