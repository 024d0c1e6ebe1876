"""System checks for the project wiring."""

from __future__ import annotations

from importlib.util import find_spec
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

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


@register()
def check_encryption_keys(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E002: no key for an encryption context in production; E003: a malformed key."""
    from deskcomm import crypto

    errors: list[CheckMessage] = []
    for context in getattr(settings, "ENCRYPTION_KEYS", {}):
        problem = crypto.key_problem(context)
        if problem:
            errors.append(Error(problem, hint=_KEY_HINT, id="deskcomm.E003"))
        elif not crypto.configured_keys(context) and not crypto.dev_keys_allowed():
            errors.append(
                Error(
                    f"no encryption key is configured for {context} (production refuses to start)",
                    hint=_KEY_HINT,
                    id="deskcomm.E002",
                )
            )
    return errors


_KEY_HINT = (
    "Set the context's key in the environment (WEBHOOK_SECRETS_KEY for webhook_secrets, "
    "CPF_ENCRYPTION_KEY for cpf): "
    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
)


@register()
def check_archive_storage(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E004: S3 archive storage configured but boto3 (needed by django-storages) absent."""
    if not getattr(settings, "ARCHIVE_S3_BUCKET", ""):
        return []
    if find_spec("boto3") is not None:
        return []
    return [
        Error(
            "ARCHIVE_S3_BUCKET is set but boto3 is not installed (django-storages needs it).",
            hint="pip install boto3, or unset ARCHIVE_S3_BUCKET to archive to ARCHIVE_ROOT.",
            id="deskcomm.E004",
        )
    ]
