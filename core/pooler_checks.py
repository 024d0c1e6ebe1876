"""System checks for a transaction-mode pooler in front of the database (core.pooler)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from core import pooler
from core.checks import PROJECT_TAG

# PgBouncer's usual port: a DATABASE_URL on it with no DATABASE_POOLER is probably a pooler the
# settings do not know about.
PGBOUNCER_PORT = 6432
_POOLER_HINT = (
    "Behind PgBouncer in transaction mode set DATABASE_POOLER=transaction and "
    "DATABASE_DIRECT_URL=postgres://user@db-host:5432/ (the server itself); "
    "docs/configuration.md 'PgBouncer'."
)


@register(PROJECT_TAG)
def check_pooler_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E101 pooler without a direct URL; E102 an unknown DATABASE_POOLER; W101 a
    DATABASE_URL on PgBouncer's port with no DATABASE_POOLER."""
    value = str(getattr(settings, "DATABASE_POOLER", "") or "").lower()
    if value not in ("", pooler.TRANSACTION):
        return [
            Error(
                f"DATABASE_POOLER={value!r} is not a mode Deskcomm knows.",
                hint="Use DATABASE_POOLER=transaction for PgBouncer's transaction pooling, or "
                "leave it unset for a direct connection (or a session-mode pooler).",
                id="deskcomm.E102",
            )
        ]
    if value and not pooler.direct_params():
        return [
            Error(
                "DATABASE_POOLER=transaction without DATABASE_DIRECT_URL: the LISTEN wake-ups, "
                "the scheduler's leader lock, the job broker's pool, migrate and pg_dump need a "
                "session of their own, which a transaction-mode pooler does not keep.",
                hint=_POOLER_HINT,
                id="deskcomm.E101",
            )
        ]
    port = str(settings.DATABASES["default"].get("PORT") or "")
    if not value and port == str(PGBOUNCER_PORT):
        return [
            Warning(
                f"DATABASE_URL uses port {PGBOUNCER_PORT} (PgBouncer's) and DATABASE_POOLER is "
                "unset: through a transaction-mode pooler the tenant scope and timeouts, set "
                "per session, would not hold.",
                hint=_POOLER_HINT,
                id="deskcomm.W101",
            )
        ]
    return []


@register(Tags.database)
def check_pooler_accepts_connection(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """deskcomm.E103: the server refused the startup options (timeouts, RLS bypass) that a
    direct connection carries: a pooler the settings do not know about."""
    from django.db import OperationalError, connections

    errors: list[CheckMessage] = []
    for alias in databases or []:
        try:
            connections[alias].ensure_connection()
        except OperationalError as exc:
            if "unsupported startup parameter" in str(exc):
                errors.append(
                    Error(
                        f"database {alias!r} refused the startup options ({exc}): DATABASE_URL "
                        "is a pooler (PgBouncer) and DATABASE_POOLER is not set.",
                        hint=_POOLER_HINT,
                        id="deskcomm.E103",
                    )
                )
    return errors
