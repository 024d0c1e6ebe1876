"""System checks for the project wiring."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

POSTGRES_ENGINE = "django.db.backends.postgresql"


@register()
def check_postgres_only(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The product *is* SKIP LOCKED, LISTEN/NOTIFY and triggers: refuse any other engine."""
    errors: list[CheckMessage] = []
    for alias, config in settings.DATABASES.items():
        engine = config.get("ENGINE", "")
        if engine != POSTGRES_ENGINE:
            errors.append(
                Error(
                    f"Database {alias!r} uses {engine!r}; Deskcomm runs on PostgreSQL only.",
                    hint="Set DATABASE_URL=postgres://user@host:5432/dbname "
                    "(or run `python3 -m deskcomm.dev run` for an embedded server).",
                    id="deskcomm.E001",
                )
            )
    return errors


@register(Tags.security, deploy=True)
def check_outbound_http(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Private and loopback targets for outbound HTTP are a development convenience only."""
    if settings.OUTBOUND_HTTP_ALLOW_PRIVATE and not settings.DEBUG:
        return [
            Warning(
                "OUTBOUND_HTTP_ALLOW_PRIVATE is on: webhooks and alert webhooks may reach "
                "private and loopback addresses (SSRF).",
                hint="Turn it off outside development (OUTBOUND_HTTP_ALLOW_PRIVATE=false).",
                id="deskcomm.W002",
            )
        ]
    return []
