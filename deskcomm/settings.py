"""Deskcomm settings: all from the environment (django-environ); `.env` is read if present
(quietly: without it, the defaults hold)."""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path
from typing import Any

import environ

from core import db_roles, key_variables
from core.replica.conf import ALIAS as REPLICA_ALIAS
from core.replica.conf import replica_database
from core.timeout_options import with_timeouts
from jobs.broker_config import choose_backend, dramatiq_broker

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()


def read_dotenv(path: Path) -> None:
    """Read `path` into the environment (what is already set wins), when it exists: without it
    the defaults hold, and django-environ's "not found" line would only be noise."""
    if path.is_file():
        environ.Env.read_env(path, overwrite=False)


read_dotenv(BASE_DIR / ".env")
# prometheus-client turns its multiprocess mode on when this variable exists at all, even empty
# (as in .env.example), and then writes its sample files into the working directory: empty
# means unset here, as for every other setting. (Before any metric exists: apps load later.)
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)

# The apps' knob dicts (API, EVENTBUS, WEBHOOKS, LGPD) hold only what the environment sets: each
# knob's type and default are declared once, in the app's conf class (core.conf.AppSettings).
unset: Any = object()  # the default of such a read: `given` then leaves the knob out


def given(knobs: dict[str, Any]) -> dict[str, Any]:
    """The knobs whose environment variable is set."""
    return {name: value for name, value in knobs.items() if value is not unset}


DEBUG = env.bool("DEBUG", default=False)
# A development default only; the deploy checks refuse it when DEBUG is off.
INSECURE_DEV_SECRET_KEY = "django-insecure-deskcomm-development-only"
# An empty value (as in .env.example) counts as unset.
SECRET_KEY = env.str("SECRET_KEY", default="") or INSECURE_DEV_SECRET_KEY
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "core.admin_app.DeskcommAdminConfig",  # django.contrib.admin, organization-scoped staff
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served as our own static files (no CDN)
    "django_dramatiq",
    "django_celery_beat",
    # Admin login hardening (core.admin_otp): lockout after failed logins, TOTP second factor.
    "axes",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "core",
    "jobs",
    "eventbus",
    "crm",
    "webhooks",
    "whatsapp",
    "lgpd",
    "pipelines",
    "ai",
    "nuvemshop",
]

MIDDLEWARE = [
    # First: everything after it (middleware, views, emit, audit, logs) sees the request id.
    "core.middleware.RequestIdMiddleware",
    # Before anything reads a body: chunked bodies get a length, so the size limit holds.
    "core.middleware.ChunkedBodyMiddleware",
    "core.metrics.HttpMetricsMiddleware",
    # Read-only mode (a database outage): receivers buffer to disk, API writes answer 503.
    "core.read_only.ReadOnlyModeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The second factor: request.user.is_verified(); staff without it are sent to verify/enrol.
    "django_otp.middleware.OTPMiddleware",
    "core.admin_otp.AdminOTPMiddleware",
    # Row-level security: staff see every tenant (superusers, platform operators) or the
    # tenant they work in (organization-scoped staff), enforced by the session's scope.
    "core.admin_scope.AdminScopeMiddleware",
    # Read-your-writes: after a write, this browser's reads skip the read replica for a while.
    "core.replica.routing.PrimaryAfterWriteMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last (django-axes): answers a locked-out login attempt with 429.
    "axes.middleware.AxesMiddleware",
]

# Security headers. Django's defaults already send nosniff and X-Frame-Options: DENY; these
# make them explicit. TLS (usually terminated by a reverse proxy): set HTTPS=true for HSTS,
# the https redirect, secure cookies and trusting the proxy's X-Forwarded-Proto.
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = env.str("SECURE_REFERRER_POLICY", default="same-origin")
HTTPS = env.bool("HTTPS", default=False)
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=HTTPS)
# Probes and Prometheus talk plain HTTP inside the private network.
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health$", r"^metrics$"]
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=HTTPS)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
CSRF_COOKIE_SECURE = HTTPS  # the session cookie: below (secure whenever DEBUG is off)
if HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

# django-axes first (it refuses a locked-out login before the password is checked); then the
# model backend, under which organization-scoped staff hold no permission on platform-wide
# models (core.admin_scope).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "core.admin_scope.ScopedModelBackend",
]

# Admin login hardening (docs/admin.md "Admin security"). Lockout: after ADMIN_LOGIN_FAILURE_LIMIT
# failed logins for one username from one address, that pair is refused (429) for
# ADMIN_LOGIN_COOLOFF_MINUTES, or until `manage.py admin_recover USER` unlocks it.
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = dt.timedelta(minutes=env.int("ADMIN_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
# TOTP second factor for staff (core.admin_otp), on unless DEBUG; production refuses to start
# with it off (deskcomm.E060) unless ADMIN_OTP_ALLOW_DISABLED says so on purpose.
ADMIN_OTP_REQUIRED = env.bool("ADMIN_OTP_REQUIRED", default=not DEBUG)
ADMIN_OTP_ALLOW_DISABLED = env.bool("ADMIN_OTP_ALLOW_DISABLED", default=False)
OTP_TOTP_ISSUER = env.str("OTP_TOTP_ISSUER", default="Deskcomm")
# Admin sessions: short-lived (ADMIN_SESSION_MINUTES), gone when the browser closes, and the
# cookie secure (https only) whenever DEBUG is off.
SESSION_COOKIE_AGE = env.int("ADMIN_SESSION_MINUTES", default=60) * 60
SESSION_EXPIRE_AT_BROWSER_CLOSE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=HTTPS or not DEBUG)

ROOT_URLCONF = "deskcomm.urls"
WSGI_APPLICATION = "deskcomm.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# PostgreSQL only (system check deskcomm.E001 refuses anything else). `python3 -m dev`
# sets DATABASE_URL to an embedded server when the environment does not.
# Database roles (core.db_roles; docs/configuration.md "Database roles"): DATABASE_URL is the
# owner's (migrations), DATABASE_WORKER_URL the platform processes', DATABASE_WEB_URL the web
# servers'; each unset one is DATABASE_URL. DATABASE_ROLE (owner, worker or web) overrides the
# choice by command.
DATABASE_URL = env.str("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/deskcomm")
DATABASE_WORKER_URL = env.str("DATABASE_WORKER_URL", default="")
DATABASE_WEB_URL = env.str("DATABASE_WEB_URL", default="")
DATABASE_ROLE = db_roles.process_role(
    sys.argv, os.environ, explicit=env.str("DATABASE_ROLE", default="")
)
DATABASES = {
    "default": env.db_url_config(
        db_roles.role_url(
            DATABASE_ROLE, owner=DATABASE_URL, worker=DATABASE_WORKER_URL, web=DATABASE_WEB_URL
        )
    ),
}
# Workers keep their connection between handler runs; health checks drop dead ones.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# Server-side timeouts per process role, seconds (0 = none); docs/configuration.md "Database
# timeouts". Every connection opens with the web values; worker processes switch with
# core.db_timeouts.use_database_timeouts("worker"); migrate lifts the statement timeout.
DB_LOCK_TIMEOUT = env.float("DB_LOCK_TIMEOUT", default=10.0)
DB_IDLE_IN_TRANSACTION_TIMEOUT = env.float("DB_IDLE_IN_TRANSACTION_TIMEOUT", default=60.0)
DATABASE_TIMEOUTS = {
    role: {
        "statement_timeout": statement_timeout,
        "lock_timeout": DB_LOCK_TIMEOUT,
        "idle_in_transaction_session_timeout": DB_IDLE_IN_TRANSACTION_TIMEOUT,
    }
    for role, statement_timeout in {
        "web": env.float("DB_STATEMENT_TIMEOUT", default=20.0),
        "worker": env.float("DB_WORKER_STATEMENT_TIMEOUT", default=120.0),
    }.items()
}
db_options = DATABASES["default"].setdefault("OPTIONS", {})
db_options["options"] = with_timeouts(db_options.get("options", ""), DATABASE_TIMEOUTS["web"])
# TLS to a remote server (libpq sslmode: require, verify-ca, verify-full...); every alias below
# copies the default's options. A `?sslmode=` in a URL wins for that URL.
DATABASE_SSLMODE = env.str("DATABASE_SSLMODE", default="")
if DATABASE_SSLMODE:
    db_options.setdefault("sslmode", DATABASE_SSLMODE)
# Production refuses a superuser or BYPASSRLS connection (deskcomm.E009: row-level security does
# not apply to it). A managed database that gives no other role may turn this on, knowingly.
DATABASE_ALLOW_SUPERUSER = env.bool("DATABASE_ALLOW_SUPERUSER", default=False)
# A web process whose role is not the platform's reads across tenants (the staff admin, /metrics,
# cron, the receivers' lookups) through this alias, as the worker role (core.rls).
_platform = env.db_url_config(DATABASE_WORKER_URL or DATABASE_URL)
if DATABASE_ROLE == db_roles.WEB and not db_roles.same_login(_platform, DATABASES["default"]):
    DATABASES[db_roles.PLATFORM_ALIAS] = db_roles.platform_database(_platform, DATABASES["default"])

# Read replica (docs/configuration.md "Read replica"): a streaming standby that serves the
# read-only admin pages, the status page and the API lists (core.replica); writes, workers and
# migrations stay on the primary. Set after the primary's options: the replica's sessions get the
# same timeouts.
DATABASE_REPLICA_URL = env.str("DATABASE_REPLICA_URL", default="")
if DATABASE_REPLICA_URL:
    DATABASES[REPLICA_ALIAS] = replica_database(
        env.db_url_config(DATABASE_REPLICA_URL), DATABASES["default"]
    )
    if db_roles.PLATFORM_ALIAS in DATABASES:  # the replica as the worker role, for the same work
        DATABASES[db_roles.PLATFORM_REPLICA_ALIAS] = replica_database(
            {
                **env.db_url_config(DATABASE_REPLICA_URL),
                "USER": DATABASES[db_roles.PLATFORM_ALIAS]["USER"],
                "PASSWORD": DATABASES[db_roles.PLATFORM_ALIAS].get("PASSWORD", ""),
            },
            DATABASES[db_roles.PLATFORM_ALIAS],
        )
    DATABASE_ROUTERS = ["core.replica.routing.ReplicaRouter"]
DATABASE_REPLICA = given(
    {
        "MAX_LAG": env.float("DATABASE_REPLICA_MAX_LAG", default=unset),
        "CHECK_INTERVAL": env.float("DATABASE_REPLICA_CHECK_INTERVAL", default=unset),
        "PRIMARY_AFTER_WRITE_SECONDS": env.float(
            "DATABASE_REPLICA_PRIMARY_AFTER_WRITE", default=unset
        ),
    }
)

# --- Connection pooler (core.pooler; docs/configuration.md "PgBouncer") --------------------------
# DATABASE_POOLER=transaction: DATABASE_URL is a transaction-mode PgBouncer. Scope and timeouts are
# then set per transaction instead of as startup options (PgBouncer refuses those: empty, also
# against PGOPTIONS), and server-side cursors are off. DATABASE_DIRECT_URL is the server itself, for
# what needs a session (LISTEN, session advisory locks, migrate, pg_dump).
DATABASE_POOLER = env.str("DATABASE_POOLER", default="")
DATABASE_DIRECT_URL = env.str("DATABASE_DIRECT_URL", default="")
if DATABASE_POOLER.lower() == "transaction":
    # (after the replica's alias took its own copy: the replica is never pooled)
    for _alias in ("default", db_roles.PLATFORM_ALIAS):
        if _alias in DATABASES:  # the platform alias names the pooler too (as its own user)
            DATABASES[_alias]["OPTIONS"]["options"] = ""
            DATABASES[_alias]["DISABLE_SERVER_SIDE_CURSORS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
USE_I18N = True
USE_TZ = True
TIME_ZONE = "UTC"
# Operators read ISO dates and 24-hour times (deskcomm/formats/en/formats.py).
FORMAT_MODULE_PATH = ["deskcomm.formats"]

STATIC_URL = "static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=BASE_DIR / "var" / "static")
# Uploaded files (the default storage). Every storage alias is defined once, in STORAGES below.
MEDIA_ROOT = env.path("MEDIA_ROOT", default=BASE_DIR / "var" / "media")
# Directory of pg_dump/pg_restore for backups (default: the newest found that fits the server).
PG_BIN_DIR = env.str("PG_BIN_DIR", default="")

# Optional brokers for scale (the default broker is PostgreSQL itself); the health check
# pings the one that is set.
REDIS_URL = env.str("REDIS_URL", default="")
RABBITMQ_URL = env.str("RABBITMQ_URL", default="")

# GET /api/v1/health: each check's timeout, and the whole answer's budget (seconds).
HEALTH = {
    "CHECK_TIMEOUT": env.float("HEALTH_CHECK_TIMEOUT", default=1.0),
    "BUDGET_SECONDS": env.float("HEALTH_BUDGET_SECONDS", default=1.5),
}

# Largest request body, bytes; the API answers 413 beyond it (admin forms too are bound by it).
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=1024 * 1024)

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["core.api.parsers.SafeJSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.api.negotiation.JsonFirstNegotiation",
    "DEFAULT_AUTHENTICATION_CLASSES": ["core.api.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["core.api.permissions.HasRequiredScope"],
    "DEFAULT_THROTTLE_CLASSES": ["core.api.throttling.ApiKeyRateThrottle"],
    "EXCEPTION_HANDLER": "core.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.IntegratorSchema",
    "UNAUTHENTICATED_USER": None,
}

# The integration API knobs, read at call time through `core.api.conf.api_settings`.
API = given(
    {
        # Requests per API key (all processes together): "N/second|minute|hour|day".
        "THROTTLE_RATE": env.str("API_THROTTLE_RATE", default=unset),
        # How long an Idempotency-Key replays its first response.
        "IDEMPOTENCY_TTL_SECONDS": env.int("API_IDEMPOTENCY_TTL_SECONDS", default=unset),
        "PAGE_SIZE": env.int("API_PAGE_SIZE", default=unset),
        "MAX_PAGE_SIZE": env.int("API_MAX_PAGE_SIZE", default=unset),
        # An API key's last_used_at is written at most this often (not on every request).
        "KEY_LAST_USED_RESOLUTION_SECONDS": env.int(
            "API_KEY_LAST_USED_RESOLUTION_SECONDS", default=unset
        ),
        # Event namespaces only Deskcomm itself emits; POST /api/v1/events refuses them.
    }
)

SPECTACULAR_SETTINGS = {
    "TITLE": "Deskcomm integration API",
    "DESCRIPTION": "The event bus over HTTP. Authenticate with `Authorization: Bearer <API key>`; "
    "the key's organization scopes everything. Errors share one shape: "
    "`{error: {code, message, fields, request_id}}`.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_AUTHENTICATION": [],  # the schema and docs are public; the operations are not
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "EventStatusEnum": "eventbus.store.models.Status",
        "DeliveryStatusEnum": "eventbus.store.models.DeliveryStatus",
        "PipelineRunStatusEnum": "pipelines.models.RunStatus",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.add_probe_operations",
        "core.api.schema.add_common_headers",
        "core.api.schema.add_api_key_guide",
    ],
    # Versioned operations first, then webhooks, the legacy outbox last (Swagger UI's order).
    "TAGS": [
        {"name": "health", "description": "Liveness and readiness probes (no API key)."},
        {"name": "v1", "description": "Events, and LGPD data-subject requests."},
        {"name": "webhooks", "description": "Webhook subscriptions and their deliveries."},
        {"name": "outbox", "description": "The outbox view of the event log (legacy paths)."},
    ],
}

# Who gets operator mail (DLQ growth alerts): comma-separated e-mail addresses.
ADMINS = [(address, address) for address in env.list("ADMINS", default=[])]
# How mail leaves: smtp://user:password@host:587 (+tls), consolemail:// (default: stdout).
EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
SERVER_EMAIL = env.str("SERVER_EMAIL", default="deskcomm@localhost")
DEFAULT_FROM_EMAIL = SERVER_EMAIL
EMAIL_SUBJECT_PREFIX = "[Deskcomm] "

# Every operational alert (core.alerts: failed jobs, DLQ growth, LGPD SLA, backups) is mailed to
# ADMINS and posted to this Slack-compatible incoming webhook when set (a secret: environment
# only). Production needs at least one real destination (deskcomm.E010).
ALERT_WEBHOOK_URL = env.str("ALERT_WEBHOOK_URL", default="")

# Outbound HTTP to URLs users or operators configure (core.http.guarded_client): private and
# loopback targets are refused unless this is on (development only; a deploy check warns).
OUTBOUND_HTTP_ALLOW_PRIVATE = env.bool("OUTBOUND_HTTP_ALLOW_PRIVATE", default=False)
OUTBOUND_HTTP_TIMEOUT = env.float("OUTBOUND_HTTP_TIMEOUT", default=10.0)

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
# "json" (one JSON object per line, for log search) or "plain" (a console line for development).
LOG_FORMAT = env.str("LOG_FORMAT", default="plain" if DEBUG else "json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        # request_id (and trace/actor/source, tenant, event/delivery ids) on every record.
        "correlation": {"()": "core.logs.filters.CorrelationFilter"},
        # Personal data and secrets out of the arguments before any formatter renders them.
        "redaction": {"()": "core.logs.filters.RedactionFilter"},
    },
    "formatters": {
        "json": {
            "()": "core.logs.formatters.JsonFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "plain": {
            "()": "core.logs.formatters.PlainFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
            "formatter": LOG_FORMAT,
            "filters": ["correlation", "redaction"],
        },
        # deskcomm_errors_logged_total (seed 001 A2: an error spike), by top-level logger only.
        "error_counter": {"class": "core.logs.errors.ErrorCounter", "level": "ERROR"},
    },
    "root": {"handlers": ["console", "error_counter"], "level": LOG_LEVEL},
    # httpx logs every request's full URL at INFO: alert and webhook URLs carry their secret.
    "loggers": {"httpx": {"level": "WARNING"}},
}

# The event bus knobs, read at call time through `eventbus.store.conf.bus_settings`.
# Dotted paths of callables `fn(subject, details)` called for operational alerts (failed cron
# runs, a DLQ past its threshold), after the ERROR log line (core.alerts).
ALERT_HOOKS = env.list("EVENTBUS_ALERT_HOOKS", default=[])

EVENTBUS = given(
    {
        # Backoff after the n-th failed attempt, in seconds (30s, 1m, 2m, 5m, 10m, 30m, 1h, 2h).
        "RETRY_SCHEDULE": env.list("EVENTBUS_RETRY_SCHEDULE", cast=float, default=unset),
        # Extra random delay, as a fraction of the step (0.3 = +0-30%).
        "RETRY_JITTER": env.float("EVENTBUS_RETRY_JITTER", default=unset),
        "MAX_ATTEMPTS": env.int("EVENTBUS_MAX_ATTEMPTS", default=unset),
        # A claim's lease; the worker's heartbeat renews it every third of it while it holds the
        # deliveries, so it only runs out when the worker died, hung or lost the database. A killed
        # worker's deliveries are back in play within the lease plus the reap interval (~35 s).
        "LEASE_SECONDS": env.float("EVENTBUS_LEASE_SECONDS", default=unset),
        # One handler run longer than this fails with HandlerTimeout and is retried (per consumer:
        # @consumer(timeout=...)); webhook deliveries use WEBHOOKS_TIMEOUT instead.
        "HANDLER_TIMEOUT_SECONDS": env.float("EVENTBUS_HANDLER_TIMEOUT_SECONDS", default=unset),
        # Every slot of a worker busy with one run for this long: its claimed, unstarted deliveries
        # are released for other workers (no head-of-line blocking).
        "STUCK_RELEASE_SECONDS": env.float("EVENTBUS_STUCK_RELEASE_SECONDS", default=unset),
        # An atomic consumer's deliveries of one claim, organization and key run up to this many
        # in one transaction (one ack, one commit; savepoints only after a failure); 1: one per
        # delivery.
        "ATOMIC_GROUP": env.int("EVENTBUS_ATOMIC_GROUP", default=unset),
        # Timed-out handler threads cannot be killed; past this many still running, the worker
        # stops and exits (code 75) so its supervisor starts a clean process.
        "MAX_ABANDONED_THREADS": env.int("EVENTBUS_MAX_ABANDONED_THREADS", default=unset),
        "MAX_PAYLOAD_BYTES": env.int("EVENTBUS_MAX_PAYLOAD_BYTES", default=unset),
        # Metadata is correlation data copied to every consumer and webhook: a few ids, not content.
        "MAX_METADATA_BYTES": env.int("EVENTBUS_MAX_METADATA_BYTES", default=unset),
        # Nesting of payload and metadata (catalog payloads use <= 4 levels); deeper is refused.
        "MAX_JSON_DEPTH": env.int("EVENTBUS_MAX_JSON_DEPTH", default=unset),
        # Emitting an event of at least this priority (the catalog's, or the emit's own), or of
        # one of these types, wakes idle workers through LISTEN/NOTIFY instead of waiting for the
        # next poll.
        "NOTIFY_MIN_PRIORITY": env.int("EVENTBUS_NOTIFY_MIN_PRIORITY", default=unset),
        "NOTIFY_EVENT_TYPES": env.list("EVENTBUS_NOTIFY_EVENT_TYPES", default=unset),
        # Extra modules imported at start-up to register consumers and event types (tests use
        # it).
        "HANDLER_MODULES": env.list("EVENTBUS_HANDLER_MODULES", default=unset),
        # Dotted paths of callables `fn(deliveries)` called when work dies (after the ERROR log
        # line). The LGPD hook is always there: a dead redaction or export must reach the DPO
        # (R-L3).
        "DEAD_LETTER_HOOKS": [
            "lgpd.alerts.dead_letter_hook",
            *env.list("EVENTBUS_DEAD_LETTER_HOOKS", default=[]),
        ],
        # Per-consumer attempts an operator sets (seed 004 §5: ORDER_POST_ATTEMPTS).
        "CONSUMER_MAX_ATTEMPTS": {
            "order-post-worker": env.int("ORDER_POST_ATTEMPTS", default=5),
            # LGPD redaction: few attempts, then the DLQ and a human (the DPO), not blind retries.
            "lgpd-redact-worker": env.int("LGPD_REDACT_ATTEMPTS", default=3),
        },
        # Seed 004 §5, the outbox relay of broker-run consumers (names and defaults as the seed).
        "RELAY_ENABLED": env.bool("OUTBOX_RELAY_ENABLED", default=unset),
        "WORKER_ENABLED": env.bool("WORKER_ENABLED", default=unset),
        "RELAY_POLL_INTERVAL_MS": env.int("OUTBOX_POLL_INTERVAL_MS", default=unset),
        "RELAY_BATCH_SIZE": env.int("OUTBOX_BATCH_SIZE", default=unset),
        "RELAY_MAX_ATTEMPTS": env.int("OUTBOX_MAX_ATTEMPTS", default=unset),
        # Retention (R-E6): events older than this many days are archived, then deleted.
        "ARCHIVE_HOT_DAYS": env.int("EVENT_ARCHIVE_HOT_DAYS", default=unset),
        # Rows deleted per statement after a day is archived and verified.
        "ARCHIVE_DELETE_BATCH": env.int("EVENT_ARCHIVE_DELETE_BATCH", default=unset),
        # Partitioned event log (eventbus/history/partitions.py): monthly partitions kept ready
        # ahead.
        "PARTITIONS_AHEAD": env.int("EVENT_LOG_PARTITIONS_AHEAD", default=unset),
        # DLQ growth alert: this many deliveries of one consumer dying within the interval alerts
        # ADMINS (and the webhook, when set), at most once per interval per consumer.
        "DLQ_ALERT_THRESHOLD": env.int("EVENTBUS_DLQ_ALERT_THRESHOLD", default=unset),
        "DLQ_ALERT_INTERVAL": env.float("EVENTBUS_DLQ_ALERT_INTERVAL", default=unset),
        # Slack-compatible incoming-webhook URL (a secret: environment only); empty = mail only.
        "DLQ_ALERT_WEBHOOK_URL": env.str("EVENTBUS_DLQ_ALERT_WEBHOOK_URL", default=unset),
        # The circuit breaker per consumer (docs/workers.md "Pause, resume and circuit breakers"):
        # at least FAILURE_RATE of at least MIN_VOLUME deliveries settled within WINDOW_SECONDS
        # failed -> paused as "open"; after COOL_DOWN_SECONDS one probe runs; its success resumes
        # it.
        "BREAKER_ENABLED": env.bool("EVENTBUS_BREAKER_ENABLED", default=unset),
        "BREAKER_FAILURE_RATE": env.float("EVENTBUS_BREAKER_FAILURE_RATE", default=unset),
        "BREAKER_MIN_VOLUME": env.int("EVENTBUS_BREAKER_MIN_VOLUME", default=unset),
        "BREAKER_WINDOW_SECONDS": env.float("EVENTBUS_BREAKER_WINDOW_SECONDS", default=unset),
        "BREAKER_COOL_DOWN_SECONDS": env.float("EVENTBUS_BREAKER_COOL_DOWN_SECONDS", default=unset),
        # Per-consumer overrides of those, e.g. {"order-post-worker": {"MIN_VOLUME": 5}}.
        "BREAKER_CONSUMERS": env.json("EVENTBUS_BREAKER_CONSUMERS", default=unset),
        # Metrics: distinct event_type label values per metric and process; the rest are "other".
        "METRICS_MAX_EVENT_TYPES": env.int("EVENTBUS_METRICS_MAX_EVENT_TYPES", default=unset),
        # Per-tenant gauges: the busiest organizations on their own, the rest as "other".
        "METRICS_TOP_ORGANIZATIONS": env.int("EVENTBUS_METRICS_TOP_ORGANIZATIONS", default=unset),
        # Days of per-minute rollup rows (status charts, failure rates) the hourly purge keeps.
        "ROLLUP_KEEP_DAYS": env.int("EVENTBUS_ROLLUP_KEEP_DAYS", default=unset),
        "MAX_CAUSATION_DEPTH": env.int("EVENTBUS_MAX_CAUSATION_DEPTH", default=unset),
        "DOOR_EMIT_RATE": env.str("EVENTBUS_DOOR_EMIT_RATE", default=unset),
    }
)

# --- Jobs: dramatiq (django-dramatiq), broker chosen by environment -------------------------
# Postgres (same database, transactional enqueue) unless REDIS_URL or RABBITMQ_URL is set;
# JOBS_BROKER=postgres|redis|rabbitmq chooses explicitly (REDIS_URL then defaults to the seed's
# redis://localhost:6379).
JOBS_BROKER_DATABASE_URL = env.str("JOBS_BROKER_DATABASE_URL", default="")
JOBS_BROKER = choose_backend(
    explicit=env.str("JOBS_BROKER", default=""), redis_url=REDIS_URL, rabbitmq_url=RABBITMQ_URL
)
DRAMATIQ_BROKER = dramatiq_broker(
    backend=JOBS_BROKER,
    redis_url=REDIS_URL,
    rabbitmq_url=RABBITMQ_URL,
    # Another PostgreSQL for the job queue (enqueue is then no longer transactional).
    postgres_url=JOBS_BROKER_DATABASE_URL,
)
DRAMATIQ_AUTODISCOVER_MODULES = ["actors"]
# Job knobs (seed 004 §5 per-job attempts/concurrency), read at call time via jobs.registry.
JOBS = {
    "order-post-worker": {"CONCURRENCY": env.int("ORDER_POST_CONCURRENCY", default=4)},
    "event-log-reaper": {
        "ATTEMPTS": env.int("EVENT_LOG_REAPER_ATTEMPTS", default=1),
        "CONCURRENCY": env.int("EVENT_LOG_REAPER_CONCURRENCY", default=1),
    },
    "event-log-drain": {
        "ATTEMPTS": env.int("EVENT_LOG_DRAIN_ATTEMPTS", default=1),
        "CONCURRENCY": env.int("EVENT_LOG_DRAIN_CONCURRENCY", default=1),
        "LIMIT": env.int("EVENT_LOG_DRAIN_LIMIT", default=1000),
    },
    "process-pending-webhooks": {
        "ATTEMPTS": env.int("PROCESS_PENDING_WEBHOOKS_ATTEMPTS", default=1),
        "CONCURRENCY": env.int("PROCESS_PENDING_WEBHOOKS_CONCURRENCY", default=1),
        "LIMIT": env.int("PROCESS_PENDING_WEBHOOKS_LIMIT", default=500),
    },
    "event-log-archive": {
        "ATTEMPTS": env.int("EVENT_LOG_ARCHIVE_ATTEMPTS", default=3),
        "CONCURRENCY": env.int("EVENT_LOG_ARCHIVE_CONCURRENCY", default=1),
    },
    "dlq-alert": {
        "ATTEMPTS": env.int("DLQ_ALERT_ATTEMPTS", default=1),
        "CONCURRENCY": env.int("DLQ_ALERT_CONCURRENCY", default=1),
    },
}
# POST /api/v1/cron/<job> requires it (Bearer or x-cron-secret); unset, the endpoints refuse all.
# CRON_SECRET (seed 001's name, what an external scheduler is set up with) is an alias.
INTERNAL_CRON_SECRET = env.str("INTERNAL_CRON_SECRET", default="") or env.str(
    "CRON_SECRET", default=""
)

# --- Scheduler: django-celery-beat tables, fired into dramatiq (Celery never sends a message) ---
CELERY_BROKER_URL = "memory://"
# No Celery results, so beat installs no `celery.backend_cleanup` schedule of its own.
CELERY_RESULT_EXPIRES = None
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULER = "jobs.scheduler:LeaderDatabaseScheduler"
# Persist last_run_at after every firing, so a standby taking over knows what already fired.
CELERY_BEAT_SYNC_EVERY = 1
# Longest sleep between scheduler ticks: an admin edit takes effect within this many seconds.
CELERY_BEAT_MAX_LOOP_INTERVAL = env.float("SCHEDULER_MAX_INTERVAL", default=5.0)
DJANGO_CELERY_BEAT_TZ_AWARE = True

# --- Storage: every alias the code uses, defined once ------------------------------------------
# `archive` (old events and audit rows), `backups` (database dumps) and `lgpd_exports` are each
# the filesystem by default, or an S3-compatible bucket (django-storages + boto3; credentials
# from the standard AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY variables) when its bucket is set,
# so copies can leave the host. tests/deskcomm/test_settings.py asserts every alias exists.
S3_ENDPOINT_URL = env.str("ARCHIVE_S3_ENDPOINT_URL", default="") or None


def file_or_s3_storage(
    *, bucket: str, prefix: str, root: Path, **s3_options: object
) -> dict[str, Any]:
    """A private FileSystemStorage under `root`, or an S3 bucket under `prefix` when set."""
    if not bucket:
        return {
            "BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": root, "base_url": None},
        }
    options = {"bucket_name": bucket, "endpoint_url": S3_ENDPOINT_URL, "location": prefix}
    options.update({"default_acl": "private", "file_overwrite": False, **s3_options})
    return {"BACKEND": "storages.backends.s3.S3Storage", "OPTIONS": options}


ARCHIVE_S3_BUCKET = env.str("ARCHIVE_S3_BUCKET", default="")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "archive": file_or_s3_storage(
        bucket=ARCHIVE_S3_BUCKET,
        prefix=env.str("ARCHIVE_S3_PREFIX", default="event-archive"),
        root=env.path("ARCHIVE_ROOT", default=BASE_DIR / "var" / "archive"),
    ),
    # `manage.py backup` / the daily backup job write here; restore_check reads the newest.
    "backups": file_or_s3_storage(
        bucket=env.str("BACKUP_S3_BUCKET", default=""),
        prefix=env.str("BACKUP_S3_PREFIX", default="backups"),
        root=env.path("BACKUP_ROOT", default=BASE_DIR / "var" / "backups"),
    ),
    # LGPD exports: private (never under a public URL); downloads go through a signed link.
    "lgpd_exports": file_or_s3_storage(
        bucket=env.str("LGPD_EXPORT_S3_BUCKET", default=""),
        prefix=env.str("LGPD_EXPORT_S3_PREFIX", default="lgpd-exports"),
        root=env.path("LGPD_EXPORT_ROOT", default=BASE_DIR / "var" / "lgpd-exports"),
        querystring_auth=True,
        file_overwrite=True,
    ),
}
# Read-only mode for a database outage (seed 001 §13.2; core.read_only), switched by hand: the
# WAHA and Nuvemshop receivers write raw requests under READ_ONLY_BUFFER_ROOT and answer 200,
# other API writes (sends) answer 503; the read-only-buffer-replay job replays them once it is off.
READ_ONLY_MODE = env.bool("READ_ONLY_MODE", default=False)
READ_ONLY_BUFFER_ROOT = env.path(
    "READ_ONLY_BUFFER_ROOT", default=BASE_DIR / "var" / "read-only-buffer"
)
READ_ONLY_BUFFERED_VIEWS = ("waha-webhook", "nuvemshop-webhook")
# WAHA's sessions folder as mounted here (compose: /data/waha-sessions, read-only): the weekly
# waha-sessions-backup job archives it into the backups storage and the restore check verifies
# the newest archive. Empty: no WAHA next to this install, nothing to back up.
WAHA_SESSIONS_ROOT = env.str("WAHA_SESSIONS_ROOT", default="")
# Audit log retention (seed 000 §6.9, seed 001 §1.1): rows older than this many days are
# archived to the `archive` storage and deleted; the archives are kept this many years.
AUDIT_LOG_HOT_DAYS = env.int("AUDIT_LOG_HOT_DAYS", default=90)
AUDIT_LOG_ARCHIVE_YEARS = env.int("AUDIT_LOG_ARCHIVE_YEARS", default=5)
# Backups: dumps older than this many days are deleted after each backup (the newest is kept).
BACKUP_RETENTION_DAYS = env.int("BACKUP_RETENTION_DAYS", default=30)

# Sentry error reporting (core.sentry): off unless SENTRY_DSN is set.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
SENTRY_ENVIRONMENT = env.str("SENTRY_ENVIRONMENT", default="production")
# Fraction of requests traced for performance (0 = errors only); health probes never are.
SENTRY_TRACES_SAMPLE_RATE = env.float("SENTRY_TRACES_SAMPLE_RATE", default=0.0)

# /metrics (Prometheus): the bearer token scrapers send. Unset: the endpoint answers 403
# (fails closed) unless DEBUG is on.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")

# Encryption keys per context (core.crypto), from ENCRYPTION_KEYS_<CONTEXT> (core.key_variables:
# the names, and the deprecated ones still read): comma-separated Fernet keys, current key first;
# old keys keep decrypting during a rotation. Generate one with
# `python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`.
# ENCRYPTION_KEY_ALIASES: the deprecated names this process was given ({old: new}; logged once).
ENCRYPTION_KEYS, ENCRYPTION_KEY_ALIASES = key_variables.read_keys(
    lambda name: [key.strip() for key in env.list(name, default=[]) if key.strip()]
)

# Outbound webhooks, read at call time through `webhooks.conf.webhook_settings`.
# The worker registry (core/workers.py): every long-running process heartbeats this often; the
# console shows it stale after this many missed beats; rows silent this long are deleted, and
# rows of processes that stopped cleanly once stopped this many minutes (workers-purge job).
WORKERS = given(
    {
        "HEARTBEAT_SECONDS": env.float("WORKER_HEARTBEAT_SECONDS", default=unset),
        "STALE_AFTER_BEATS": env.int("WORKER_STALE_AFTER_BEATS", default=unset),
        "PURGE_AFTER_HOURS": env.float("WORKER_PURGE_AFTER_HOURS", default=unset),
        "KEEP_STOPPED_MINUTES": env.float("WORKER_KEEP_STOPPED_MINUTES", default=unset),
    }
)

WEBHOOKS = given(
    {
        # Seconds to open a connection, and for the whole request after that.
        "CONNECT_TIMEOUT": env.float("WEBHOOKS_CONNECT_TIMEOUT", default=unset),
        "TIMEOUT": env.float("WEBHOOKS_TIMEOUT", default=unset),
        # Development and tests only: allow loopback/private/link-local targets (metadata never).
        "ALLOW_PRIVATE_TARGETS": env.bool("WEBHOOKS_ALLOW_PRIVATE_TARGETS", default=unset),
        # Allow plain http:// subscription URLs when DEBUG is off (https is required otherwise).
        "ALLOW_HTTP": env.bool("WEBHOOKS_ALLOW_HTTP", default=unset),
        # Attempts per delivery before the DLQ, and consecutive failures before auto-disable.
        "MAX_ATTEMPTS": env.int("WEBHOOKS_MAX_ATTEMPTS", default=unset),
        "DISABLE_AFTER_FAILURES": env.int("WEBHOOKS_DISABLE_AFTER_FAILURES", default=unset),
        # Upper bound, seconds, on a receiver's Retry-After (429/503).
        "MAX_RETRY_AFTER": env.float("WEBHOOKS_MAX_RETRY_AFTER", default=unset),
        # Hours the previous secret keeps signing after a rotation.
        "ROTATION_GRACE_HOURS": env.float("WEBHOOKS_ROTATION_GRACE_HOURS", default=unset),
        # Days the attempt log is kept (`manage.py purge_webhook_attempts`).
        "ATTEMPT_RETENTION_DAYS": env.int("WEBHOOKS_ATTEMPT_RETENTION_DAYS", default=unset),
        # Requests in flight per subscription, per worker process (a slow endpoint holds no more).
        "MAX_IN_FLIGHT_PER_SUBSCRIPTION": env.int(
            "WEBHOOKS_MAX_IN_FLIGHT_PER_SUBSCRIPTION", default=unset
        ),
    }
)

# LGPD data-subject requests (lgpd app), read at call time through `lgpd.conf.lgpd_settings`.
LGPD = given(
    {
        # Days after a request before its export (access) and its redaction (redact) run.
        "EXPORT_DELAY_DAYS": env.float("LGPD_EXPORT_DELAY_DAYS", default=unset),
        "REDACT_DELAY_DAYS": env.float("LGPD_REDACT_DELAY_DAYS", default=unset),
        # How long an export's signed download link works.
        "EXPORT_LINK_DAYS": env.float("LGPD_EXPORT_LINK_DAYS", default=unset),
        # The legal deadline for access requests (LGPD Art. 19 II: 15 days) and how many days
        # before it the daily SLA check and the alerts escalate (a request past its own due date
        # is warned about at once).
        "LEGAL_DEADLINE_DAYS": env.float("LGPD_LEGAL_DEADLINE_DAYS", default=unset),
        "LEGAL_MARGIN_DAYS": env.float("LGPD_LEGAL_MARGIN_DAYS", default=unset),
        # The data protection officer: dead LGPD work and SLA breaches are e-mailed here.
        "DPO_EMAIL": env.str("LGPD_DPO_EMAIL", default=unset),
        # Public base URL of this service, for download links built outside a request.
        "PUBLIC_BASE_URL": env.str("PUBLIC_BASE_URL", default=unset),
    }
)

# Pipelines (pipelines app, seed 004), read at call time through `pipelines.conf.pipeline_settings`.
PIPELINES = given(
    {
        # Event types whose `event.<Type>` pipelines pipeline-event-worker runs (it subscribes to
        # exactly these at start-up, so other types never pay for an extra delivery).
        "EVENT_TYPES": env.list("PIPELINES_EVENT_TYPES", default=unset),
        # Seconds an http-request node waits for its target (connect at most 3 s).
        "HTTP_TIMEOUT": env.float("PIPELINES_HTTP_TIMEOUT", default=unset),
        # Development only: let http-request reach loopback/private addresses.
        "ALLOW_PRIVATE_TARGETS": env.bool("PIPELINES_ALLOW_PRIVATE_TARGETS", default=unset),
        # Bounds on tenant templates and expressions, per validation and per run
        # (docs/integrations/pipelines.md).
        "TEMPLATE_TIME_BUDGET_MS": env.int("PIPELINES_TEMPLATE_TIME_BUDGET_MS", default=unset),
        "TEMPLATE_MAX_OUTPUT": env.int("PIPELINES_TEMPLATE_MAX_OUTPUT", default=unset),
        "TEMPLATE_MAX_ITERATIONS": env.int("PIPELINES_TEMPLATE_MAX_ITERATIONS", default=unset),
        "TEMPLATE_MAX_INT_BITS": env.int("PIPELINES_TEMPLATE_MAX_INT_BITS", default=unset),
        "TEMPLATE_CACHE_ENTRIES": env.int("PIPELINES_TEMPLATE_CACHE_ENTRIES", default=unset),
        "TEMPLATE_CACHE_CHARS": env.int("PIPELINES_TEMPLATE_CACHE_CHARS", default=unset),
    }
)

# The AI workers (ai app), read at call time through `ai.conf.ai_settings`. The model gateway is
# any OpenAI-compatible server (AI_BASE_URL: a hosted gateway, vLLM, Ollama); MOCK_AI=true
# answers with deterministic fixtures (development only: production refuses it).
AI = given(
    {
        "MOCK": env.bool("MOCK_AI", default=unset),
        "API_KEY": env.str("AI_API_KEY", default=unset),
        "BASE_URL": env.str("AI_BASE_URL", default=unset),
        "CHAT_MODEL": env.str("AI_CHAT_MODEL", default=unset),
        "SENTIMENT_MODEL": env.str("AI_SENTIMENT_MODEL", default=unset),
        "EMBEDDING_MODEL": env.str("AI_EMBEDDING_MODEL", default=unset),
        "TIMEOUT": env.float("AI_TIMEOUT", default=unset),
        # The fallback model tried once on a 5xx, a timeout or no connection (empty: none).
        "FALLBACK_CHAT_MODEL": env.str("AI_FALLBACK_CHAT_MODEL", default=unset),
        "FALLBACK_BASE_URL": env.str("AI_FALLBACK_BASE_URL", default=unset),
        "FALLBACK_API_KEY": env.str("AI_FALLBACK_API_KEY", default=unset),
        "PRICE_INPUT_CENTS_PER_MTOK": env.float("AI_PRICE_INPUT_CENTS_PER_MTOK", default=unset),
        "PRICE_OUTPUT_CENTS_PER_MTOK": env.float("AI_PRICE_OUTPUT_CENTS_PER_MTOK", default=unset),
        "PRICE_CACHED_INPUT_CENTS_PER_MTOK": env.float(
            "AI_PRICE_CACHED_INPUT_CENTS_PER_MTOK", default=unset
        ),
        "PRICE_EMBEDDING_CENTS_PER_MTOK": env.float(
            "AI_PRICE_EMBEDDING_CENTS_PER_MTOK", default=unset
        ),
        "DAILY_BUDGET_CENTS": env.int("AI_DAILY_BUDGET_CENTS", default=unset),
        "BUDGET_WARNING_PCT": env.float("AI_BUDGET_WARNING_PCT", default=unset),
        "MAX_INLINE_RETRY_AFTER": env.float("AI_MAX_INLINE_RETRY_AFTER", default=unset),
        "HANDOFF_AFTER_FAILURES": env.int("AI_HANDOFF_AFTER_FAILURES", default=unset),
        "SENTIMENT_BEFORE_REPLY": env.bool("AI_SENTIMENT_BEFORE_REPLY", default=unset),
        "BUDGET_FALLBACK_MESSAGE": env.str("AI_BUDGET_FALLBACK_MESSAGE", default=unset),
        "PROVIDER_ALERT_AFTER_FAILURES": env.int("AI_PROVIDER_ALERT_AFTER_FAILURES", default=unset),
        "PROVIDER_HEALTH_DAYS": env.float("AI_PROVIDER_HEALTH_DAYS", default=unset),
        "HISTORY_MESSAGES": env.int("AI_HISTORY_MESSAGES", default=unset),
        "RAG_TOP_K": env.int("AI_RAG_TOP_K", default=unset),
        "RAG_EF_SEARCH": env.int("AI_RAG_EF_SEARCH", default=unset),
        "MEDIA_RETENTION_DAYS": env.int("AI_MEDIA_RETENTION_DAYS", default=unset),
    }
)

# Nuvemshop (Tiendanube) integration, read at call time through `nuvemshop.conf`.
NUVEMSHOP = given(
    {
        # The app's id and secret (partner dashboard); the secret also verifies store webhooks.
        "APP_ID": env.str("NUVEMSHOP_CLIENT_ID", default=unset),
        "CLIENT_SECRET": env.str("NUVEMSHOP_CLIENT_SECRET", default=unset),
        # Hosts (defaults: nuvemshop.com.br); tests point them at a loopback fake.
        "AUTHORIZE_URL": env.str("NUVEMSHOP_AUTHORIZE_URL", default=unset),
        "TOKEN_URL": env.str("NUVEMSHOP_TOKEN_URL", default=unset),
        "API_BASE_URL": env.str("NUVEMSHOP_API_BASE_URL", default=unset),
        "USER_AGENT": env.str("NUVEMSHOP_USER_AGENT", default=unset),
        "WEBHOOK_BASE_URL": env.str("NUVEMSHOP_WEBHOOK_BASE_URL", default=unset),
        # Requests per window shared by every worker of a store (seed: 300 per minute).
        "RATE_LIMIT_REQUESTS": env.int("NUVEMSHOP_RATE_LIMIT_REQUESTS", default=unset),
        "RATE_LIMIT_WINDOW_SECONDS": env.float(
            "NUVEMSHOP_RATE_LIMIT_WINDOW_SECONDS", default=unset
        ),
        "PER_PAGE": env.int("NUVEMSHOP_PER_PAGE", default=unset),
        "TIMEOUT": env.float("NUVEMSHOP_TIMEOUT", default=unset),
        # Development and tests only: allow a loopback/private API host.
        "ALLOW_PRIVATE_HOSTS": env.bool("NUVEMSHOP_ALLOW_PRIVATE_HOSTS", default=unset),
        "LEAD_WON_ON_PAID": env.bool("NUVEMSHOP_LEAD_WON_ON_PAID", default=unset),
    }
)

# The CRM (crm app): the conversation lifecycle and its consumers, read through `crm.conf`.
CRM = given(
    {
        "WINDOW_HOURS": env.float("CRM_WINDOW_HOURS", default=unset),
        "START_KEYWORDS": env.list("CRM_START_KEYWORDS", default=unset),
        "SLA_FIRST_RESPONSE_SECONDS": env.float("CRM_SLA_FIRST_RESPONSE_SECONDS", default=unset),
        "SLA_RESOLUTION_SECONDS": env.float("CRM_SLA_RESOLUTION_SECONDS", default=unset),
        "CSAT_QUESTION": env.str("CRM_CSAT_QUESTION", default=unset),
        "REENGAGE_TEMPLATE": env.str("CRM_REENGAGE_TEMPLATE", default=unset),
    }
)

# WhatsApp through WAHA (whatsapp app), read at call time through `whatsapp.conf`.
WHATSAPP = given(
    {
        # The installation's WAHA: defaults of a session that leaves its own fields empty.
        "BASE_URL": env.str("WAHA_BASE_URL", default=unset),
        "API_KEY": env.str("WAHA_API_KEY", default=unset),
        "WEBHOOK_SECRET": env.str("WAHA_WEBHOOK_SECRET", default=unset),
        # A webhook whose `timestamp` is further than this from now (stale or future) is refused.
        "WEBHOOK_WINDOW_SECONDS": env.float("WAHA_WEBHOOK_WINDOW_SECONDS", default=unset),
        "CONNECT_TIMEOUT": env.float("WAHA_CONNECT_TIMEOUT", default=unset),
        "TIMEOUT": env.float("WAHA_TIMEOUT", default=unset),
        # WAHA on a private network (docker compose): allow private/loopback addresses.
        "ALLOW_PRIVATE_TARGETS": env.bool("WAHA_ALLOW_PRIVATE_TARGETS", default=unset),
        "SEND_ATTEMPTS": env.int("WAHA_SEND_ATTEMPTS", default=unset),
        "MAX_RETRY_AFTER": env.float("WAHA_MAX_RETRY_AFTER", default=unset),
        "STUCK_AFTER_SECONDS": env.float("WAHA_STUCK_AFTER_SECONDS", default=unset),
        "ALERT_AFTER_SECONDS": env.float("WAHA_ALERT_AFTER_SECONDS", default=unset),
        "LIDS_PER_RUN": env.int("WAHA_LIDS_PER_RUN", default=unset),
        "PUBLIC_BASE_URL": env.str("PUBLIC_BASE_URL", default=unset),
        "PENDING_ACK_DAYS": env.float("WAHA_PENDING_ACK_DAYS", default=unset),
        "STOP_KEYWORDS": env.list("WHATSAPP_STOP_KEYWORDS", default=unset),
        "CONSENT_TYPE": env.str("WHATSAPP_CONSENT_TYPE", default=unset),
    }
)
