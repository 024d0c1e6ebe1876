"""System checks of the AI app: no mock in production, the vector extension installed."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register
from django.db import connection
from django.db.utils import DatabaseError

from ai.conf import ai_settings


@register(Tags.security)
def check_mock_ai(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """ai.E001: MOCK_AI with DEBUG off (the fixtures would answer real customers).

    An every-start check, not only a deploy one: the workers (`drain_events`, which runs the
    checks) refuse to start as well as the web process (core.checks.refuse_unsafe_start).
    """
    if settings.DEBUG or not ai_settings.MOCK:
        return []
    return [
        Error(
            "MOCK_AI is on with DEBUG off: customers would get canned answers, not the model.",
            hint="Unset MOCK_AI in production and configure AI_API_KEY / AI_BASE_URL.",
            id="ai.E001",
        )
    ]


@register(Tags.database)
def check_vector_extension(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """ai.E002: the pgvector extension is not available on the database (`--database` checks)."""
    databases = kwargs.get("databases") or []
    if "default" not in databases:
        return []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
            available = cursor.fetchone() is not None
    except DatabaseError:
        return []  # the database checks report an unreachable database themselves
    if available:
        return []
    return [
        Error(
            "The PostgreSQL extension 'vector' (pgvector) is not available: the AI app's "
            "chunk table cannot be created.",
            hint="Install pgvector on the database server (Debian/Ubuntu: "
            "postgresql-<version>-pgvector; managed services: enable the 'vector' extension), "
            "then run `CREATE EXTENSION vector;` as a superuser (or let `migrate` do it). "
            "The embedded development PostgreSQL ships it.",
            id="ai.E002",
        )
    ]
