"""System checks for the project wiring."""

from __future__ import annotations

import tempfile
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register, run_checks
from django.core.checks.registry import registry
from django.core.exceptions import ValidationError
from django.core.management.base import SystemCheckError
from django.core.validators import validate_email

from core import db_roles
from core.db_roles import PLATFORM_ALIASES, PLATFORM_GROUP
from core.replica.conf import ALIAS as REPLICA_ALIAS

POSTGRES_ENGINE = "django.db.backends.postgresql"
# The project's own checks (no Django tag fits them); `manage.py check --tag deskcomm`.
PROJECT_TAG = "deskcomm"
# What only the web serves: the URL checks import the whole URLconf (DRF, drf-spectacular,
# django.test, Jinja2...), the admin's and the template checks load every template tag library
# (DRF's pulls in requests): ~16 MB together, so the worker commands leave them out.
WEB_ONLY_TAGS = frozenset({Tags.urls, Tags.admin, Tags.templates})


def worker_check_tags() -> list[str]:
    """The tags of every registered check but the web-only ones: what a worker command runs
    at start (`drain_events`). A check without a tag would be left out: the project's carry
    PROJECT_TAG (tests/core/test_checks.py holds every check to one)."""
    tags = {
        tag for check in registry.get_checks(include_deployment_checks=True) for tag in check.tags
    }
    return sorted(tags - WEB_ONLY_TAGS)


@register(PROJECT_TAG)
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
                    "(or run `python3 -m dev run` for an embedded server).",
                    id="deskcomm.E001",
                )
            )
    return errors


@register(PROJECT_TAG)
def check_encryption_keys(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E002: no key for an encryption context in production; E003: a malformed key."""
    from core import crypto

    errors: list[CheckMessage] = []
    for context in getattr(settings, "ENCRYPTION_KEYS", {}):
        problem = crypto.key_problem(context)
        if problem:
            errors.append(Error(problem, hint=_KEY_HINT, id="deskcomm.E003"))
        elif not crypto.configured_keys(context) and not crypto.dev_keys_allowed():
            errors.append(
                Error(
                    f"{crypto.missing_key_message(context)} (production refuses to start)",
                    hint=_KEY_HINT,
                    id="deskcomm.E002",
                )
            )
    return errors


_KEY_HINT = (
    "Generate a key with "
    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
)


@register(Tags.database)
def check_not_superuser(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """A superuser (or BYPASSRLS role) skips row-level security: no tenant wall. deskcomm.E009 in
    production (unless DATABASE_ALLOW_SUPERUSER, for a managed database that offers no other
    role), checked at every process's start; deskcomm.W003 in development."""
    from django.db import OperationalError, connections

    from core import crypto

    refused = not crypto.dev_keys_allowed() and not settings.DATABASE_ALLOW_SUPERUSER
    if databases is None:
        # A process's start (WSGI, a worker command) asks for no database: in production this
        # check connects anyway, so a superuser connection never serves; elsewhere it waits for
        # `check --database` (and `migrate`). A database that is down does not stop the start.
        if not refused:
            return []
        databases = list(settings.DATABASES)
    messages: list[CheckMessage] = []
    # The read replica is a copy of the primary, roles included; its own checks (core.replica)
    # report it, as warnings: a replica that is down must not fail this check run.
    for alias in [alias for alias in databases if alias != REPLICA_ALIAS]:
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute(
                    "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
                )
                row = cursor.fetchone()
        except OperationalError:
            continue  # no connection: deskcomm.E103 (core.pooler_checks) says why
        if not (row and row[0]):
            continue
        msg = (
            f"database {alias!r} connects as a superuser (or a BYPASSRLS role): "
            "row-level security, the second tenant wall, does not apply to it."
        )
        hint = (
            "Connect as a role without SUPERUSER/BYPASSRLS that owns the database "
            "(python3 -m dev creates one: 'deskcomm'; compose: the db-roles service)."
        )
        if refused:
            hint += " A managed database with no such role: DATABASE_ALLOW_SUPERUSER=true."
            messages.append(Error(msg, hint=hint, id="deskcomm.E009"))
        else:
            messages.append(Warning(msg, hint=hint, id="deskcomm.W003"))
    return messages


# Whether the session's role may use the bypass; NULL while the group role does not exist yet
# (a fresh install before its migrations: core 0013 creates it).
_PLATFORM_MEMBER_SQL = (
    f"SELECT CASE WHEN to_regrole('{PLATFORM_GROUP}') IS NOT NULL"
    f" THEN pg_has_role('{PLATFORM_GROUP}', 'MEMBER') END"
)


@register(Tags.database)
def check_database_roles(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[CheckMessage]:
    """deskcomm.E040: a platform connection (a bypassing process's, a web process's `platform`
    alias) whose role is not a member of deskcomm_platform: its bypass shows nothing, so its
    work silently finds no rows. W040: a web process whose role is a member: a statement it
    sends can lift the tenant wall (core.db_roles)."""
    from django.db import OperationalError, connections

    from core import rls

    messages: list[CheckMessage] = []
    for alias in [alias for alias in databases or [] if alias != REPLICA_ALIAS]:
        platform = alias in PLATFORM_ALIASES or (alias == "default" and rls.process_bypasses())
        web = alias == "default" and not platform and settings.DATABASE_ROLE == db_roles.WEB
        if not (platform or web) or settings.DATABASE_ROLE == db_roles.OWNER:
            continue  # the owner's membership is core 0013's to ensure
        try:
            with connections[alias].cursor() as cursor:
                cursor.execute(_PLATFORM_MEMBER_SQL)
                member = cursor.fetchone()[0]
        except OperationalError:
            continue  # no connection: deskcomm.E103 (core.pooler_checks) says why
        user = connections[alias].settings_dict.get("USER")
        if platform and member is False:
            messages.append(
                Error(
                    f"database {alias!r} connects as {user!r}, which is not a member of "
                    f"{PLATFORM_GROUP}: this platform connection's bypass shows no tenant's rows.",
                    hint="Set DATABASE_WORKER_URL to the worker role (python3 -m dev creates "
                    f"deskcomm_worker), or GRANT {PLATFORM_GROUP} TO {user} (docs/configuration.md "
                    '"Database roles").',
                    id="deskcomm.E040",
                )
            )
        elif web and member:
            messages.append(
                Warning(
                    f"the web process connects as {user!r}, a member of {PLATFORM_GROUP}: a "
                    "statement it sends can lift the tenant wall (SET app.rls_bypass = on).",
                    hint="Set DATABASE_WEB_URL to a role outside it (python3 -m dev creates "
                    'deskcomm_web; docs/configuration.md "Database roles").',
                    id="deskcomm.W040",
                )
            )
    return messages


@register(PROJECT_TAG)
def check_archive_storage(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E007: S3 archive storage configured but boto3 (needed by django-storages) absent."""
    if not getattr(settings, "ARCHIVE_S3_BUCKET", ""):
        return []
    if find_spec("boto3") is not None:
        return []
    return [
        Error(
            "ARCHIVE_S3_BUCKET is set but boto3 is not installed (django-storages needs it).",
            hint="pip install boto3, or unset ARCHIVE_S3_BUCKET to archive to ARCHIVE_ROOT.",
            id="deskcomm.E007",
        )
    ]


# The file roots that must outlive a container (every one a setting or a storage alias's
# location; docs/deployment.md "Data volume"). STATIC_ROOT is not one: the
# image collects it at build time, and PROMETHEUS_MULTIPROC_DIR is a per-start scratch directory.
FILE_ROOT_STORAGES = {
    "ARCHIVE_ROOT": "archive",
    "BACKUP_ROOT": "backups",
    "LGPD_EXPORT_ROOT": "lgpd_exports",
}


def file_roots() -> dict[str, Path]:
    """Each filesystem root the product writes data to, by the setting that names it (a storage
    on an S3 bucket has none)."""
    roots = {
        "MEDIA_ROOT": Path(str(settings.MEDIA_ROOT)),
        "READ_ONLY_BUFFER_ROOT": Path(str(settings.READ_ONLY_BUFFER_ROOT)),
    }
    for name, alias in FILE_ROOT_STORAGES.items():
        options = settings.STORAGES.get(alias, {}).get("OPTIONS", {})
        if settings.STORAGES.get(alias, {}).get("BACKEND", "").endswith("FileSystemStorage"):
            roots[name] = Path(str(options["location"]))
    waha = getattr(settings, "WAHA_SESSIONS_ROOT", "")
    if waha:
        roots["WAHA_SESSIONS_ROOT"] = Path(str(waha))
    return roots


def _container_local(root: Path) -> str:
    """Why `root` would not outlive its container, or ''."""
    if not root.is_absolute():
        return "a relative path (resolved inside the process's working directory)"
    # The code directory (the image's /app) and the temporary directory live in the container.
    for place, what in (
        (Path(settings.BASE_DIR).resolve(), "the code directory"),
        (Path(tempfile.gettempdir()).resolve(), "the temporary directory"),
    ):
        if root == place or place in root.parents:
            return f"inside {what} ({place})"
    return ""


@register(PROJECT_TAG)
def check_file_roots(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E008: in production, a file root that is relative or container-local: archived
    events, backups and LGPD exports written there are lost with the container, and what one
    container writes the others cannot serve."""
    from core import crypto

    if crypto.dev_keys_allowed():
        return []
    errors: list[CheckMessage] = []
    for name, root in file_roots().items():
        problem = _container_local(root)
        if problem:
            errors.append(
                Error(
                    f"{name} is {str(root)!r}, {problem}: its files are lost with the container "
                    "and the other processes cannot read them.",
                    hint=f"Set {name} under the shared data volume (e.g. /data/...; the image and "
                    "docker-compose*.yml mount it at /data for every process) or use the "
                    "S3-compatible bucket (docs/deployment.md).",
                    id="deskcomm.E008",
                )
            )
    return errors


# Mail backends that deliver nothing to anyone (consolemail:// is the default EMAIL_URL).
_UNDELIVERED_MAIL = ("console", "locmem", "dummy", "filebased")


@register(PROJECT_TAG)
def check_alert_destination(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E010: production with nowhere for an alert to go (no ADMINS with a delivering
    mail backend, no ALERT_WEBHOOK_URL): a failed backup or a growing DLQ would reach only the
    logs. An error, not a warning: nobody reads a warning on a server nobody watches."""
    from core import crypto

    if crypto.dev_keys_allowed() or settings.ALERT_WEBHOOK_URL:
        return []
    backend = str(getattr(settings, "EMAIL_BACKEND", ""))
    mails = bool(settings.ADMINS) and not any(f".{kind}." in backend for kind in _UNDELIVERED_MAIL)
    if mails:
        return []
    return [
        Error(
            "no alert destination: ADMINS is empty or EMAIL_URL does not send mail "
            f"({backend}), and ALERT_WEBHOOK_URL is not set; alerts would reach nobody.",
            hint="Set ADMINS and an smtp:// or smtp+tls:// EMAIL_URL (.env.example), and/or "
            "ALERT_WEBHOOK_URL (a Slack-compatible incoming webhook).",
            id="deskcomm.E010",
        )
    ]


@register(PROJECT_TAG)
def check_admin_second_factor(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E012: production with the admin's TOTP second factor off (ADMIN_OTP_REQUIRED
    false) and no ADMIN_OTP_ALLOW_DISABLED saying it is on purpose: a stolen staff password
    would open the admin (core.admin_otp)."""
    from core import crypto

    if crypto.dev_keys_allowed() or settings.ADMIN_OTP_REQUIRED:
        return []
    if settings.ADMIN_OTP_ALLOW_DISABLED:
        return []
    return [
        Error(
            "ADMIN_OTP_REQUIRED is off in production: staff would sign in to the admin with a "
            "password alone (production refuses to start).",
            hint="Unset ADMIN_OTP_REQUIRED (on by default without DEBUG); if the admin is "
            "reachable only through another second factor (an SSO proxy), set "
            "ADMIN_OTP_ALLOW_DISABLED=true.",
            id="deskcomm.E012",
        )
    ]


@register(PROJECT_TAG)
def check_dpo_address(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """deskcomm.E011: production without a valid LGPD_DPO_EMAIL. The LGPD mails (a request past
    its due date, dead export or redaction work: lgpd.alerts.email_dpo) go to that one address
    and to no one else, ADMINS included: empty, they reach only a log line, and the legal
    deadlines (LGPD Art. 19) pass silently. An error, as E010, for the same reason."""
    from core import crypto

    if crypto.dev_keys_allowed():
        return []
    address = str(getattr(settings, "LGPD", {}).get("DPO_EMAIL") or "").strip()
    try:
        validate_email(address)
    except ValidationError:
        problem = "is empty" if not address else f"is not an e-mail address ({address!r})"
        return [
            Error(
                f"LGPD_DPO_EMAIL {problem}: the LGPD SLA and dead-work mails would reach nobody.",
                hint="Set LGPD_DPO_EMAIL to the data protection officer's address (one address; "
                "deploy/install.sh defaults it to the first ADMINS address).",
                id="deskcomm.E011",
            )
        ]
    return []


# Shorter than this (or with few distinct characters) a SECRET_KEY is guessable; Django's own
# deploy check uses the same bounds but only warns.
_MIN_SECRET_KEY_LENGTH = 50
_MIN_SECRET_KEY_CHARS = 5


@register(Tags.security, deploy=True)
def check_production_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """With DEBUG off: E004 unsafe SECRET_KEY, E005 no ALLOWED_HOSTS, E006 a context without a
    key even though the development SECRET_KEY would derive one (E002 covers the other case);
    W001 no METRICS_TOKEN (/metrics stays closed)."""
    if settings.DEBUG:
        return []
    return [*_secret_key_errors(), *_allowed_hosts_errors(), *_key_errors(), *_metrics_warnings()]


def _secret_key_errors() -> list[CheckMessage]:
    key = settings.SECRET_KEY or ""
    if (
        key == settings.INSECURE_DEV_SECRET_KEY
        or len(key) < _MIN_SECRET_KEY_LENGTH
        or (len(set(key)) < _MIN_SECRET_KEY_CHARS)
    ):
        return [
            Error(
                "SECRET_KEY is missing, the development default, or too short for production.",
                hint="Set SECRET_KEY to 50+ random characters: "
                'python -c "import secrets; print(secrets.token_urlsafe(64))"',
                id="deskcomm.E004",
            )
        ]
    return []


def _allowed_hosts_errors() -> list[CheckMessage]:
    if settings.ALLOWED_HOSTS:
        return []
    return [
        Error(
            "ALLOWED_HOSTS is empty: every request would be refused.",
            hint="Set ALLOWED_HOSTS to the host names this server answers to (comma-separated).",
            id="deskcomm.E005",
        )
    ]


@register(Tags.security, deploy=True)
def check_outbound_http(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Private and loopback targets for outbound HTTP are a development convenience only."""
    if settings.DEBUG:
        return []
    switches = [
        name
        for name, on in (
            ("OUTBOUND_HTTP_ALLOW_PRIVATE", settings.OUTBOUND_HTTP_ALLOW_PRIVATE),
            ("WEBHOOKS_ALLOW_PRIVATE_TARGETS", settings.WEBHOOKS.get("ALLOW_PRIVATE_TARGETS")),
        )
        if on
    ]
    if not switches:
        return []
    return [
        Warning(
            f"{' and '.join(switches)} on: outbound requests (alert webhooks, webhooks) may "
            "reach private and loopback addresses (SSRF).",
            hint=f"Turn {' and '.join(switches)} off outside development.",
            id="deskcomm.W002",
        )
    ]


def _key_errors() -> list[CheckMessage]:
    from core import crypto

    return [
        Error(
            f"no encryption key is configured for {context} (production refuses to start)",
            hint=_KEY_HINT,
            id="deskcomm.E006",
        )
        for context in getattr(settings, "ENCRYPTION_KEYS", {})
        # With a real SECRET_KEY, E002 (an every-start check) already reports it.
        if not crypto.configured_keys(context) and crypto.dev_keys_allowed()
    ]


def _metrics_warnings() -> list[CheckMessage]:
    if settings.METRICS_TOKEN:
        return []
    return [
        Warning(
            "METRICS_TOKEN is not set: /metrics answers 403 to everyone.",
            hint="Set METRICS_TOKEN and give it to Prometheus as a bearer token.",
            id="deskcomm.W001",
        )
    ]


def refuse_unsafe_start() -> None:
    """Run every check, deploy ones included, and raise on errors (DEBUG off only).

    The web process calls it at WSGI start: gunicorn does not run system checks on its own.
    """
    if settings.DEBUG:
        return
    serious = [
        m
        for m in run_checks(include_deployment_checks=True)
        if m.is_serious() and not m.is_silenced()
    ]
    if serious:
        lines = "\n".join(f"{m.id}: {m.msg} (hint: {m.hint})" for m in serious)
        raise SystemCheckError(f"Refusing to start with unsafe settings:\n{lines}")
