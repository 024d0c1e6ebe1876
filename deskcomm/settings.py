"""Deskcomm settings: all from the environment (django-environ); `.env` is read if present."""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DEBUG = env.bool("DEBUG", default=False)
# A development default only; the deploy checks refuse it when DEBUG is off.
INSECURE_DEV_SECRET_KEY = "django-insecure-deskcomm-development-only"
SECRET_KEY = env.str("SECRET_KEY", default=INSECURE_DEV_SECRET_KEY)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.postgres",
    "rest_framework",
    "deskcomm",
    "eventbus",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "deskcomm.middleware.RequestIdMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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

# PostgreSQL only (system check deskcomm.E001 refuses anything else). `python3 -m deskcomm.dev`
# sets DATABASE_URL to an embedded server when the environment does not.
DATABASES = {
    "default": env.db_url("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/deskcomm"),
}
# Workers keep their connection between handler runs; health checks drop dead ones.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

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

REST_FRAMEWORK = {
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}

# Who gets operator mail (DLQ growth alerts): comma-separated e-mail addresses.
ADMINS = [(address, address) for address in env.list("ADMINS", default=[])]
# How mail leaves: smtp://user:password@host:587 (+tls), consolemail:// (default: stdout).
EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
SERVER_EMAIL = env.str("SERVER_EMAIL", default="deskcomm@localhost")
DEFAULT_FROM_EMAIL = SERVER_EMAIL
EMAIL_SUBJECT_PREFIX = "[Deskcomm] "

# Outbound HTTP to URLs users or operators configure (deskcomm.http.guarded_client): private and
# loopback targets are refused unless this is on (development only; a deploy check warns).
OUTBOUND_HTTP_ALLOW_PRIVATE = env.bool("OUTBOUND_HTTP_ALLOW_PRIVATE", default=False)
OUTBOUND_HTTP_TIMEOUT = env.float("OUTBOUND_HTTP_TIMEOUT", default=10.0)

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain"},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
}

# The event bus knobs, read at call time through `eventbus.conf.bus_settings`.
EVENTBUS = {
    # Backoff after the n-th failed attempt, in seconds (30s, 1m, 2m, 5m, 10m, 30m, 1h, 2h).
    "RETRY_SCHEDULE": env.list(
        "EVENTBUS_RETRY_SCHEDULE", cast=float, default=[30, 60, 120, 300, 600, 1800, 3600, 7200]
    ),
    # Extra random delay, as a fraction of the step (0.3 = +0-30%).
    "RETRY_JITTER": env.float("EVENTBUS_RETRY_JITTER", default=0.3),
    "MAX_ATTEMPTS": env.int("EVENTBUS_MAX_ATTEMPTS", default=8),
    # A claimed delivery returns to pending if its worker has not finished it by then (seed: 5 min).
    "LEASE_SECONDS": env.float("EVENTBUS_LEASE_SECONDS", default=300.0),
    "MAX_PAYLOAD_BYTES": env.int("EVENTBUS_MAX_PAYLOAD_BYTES", default=256 * 1024),
    # Emitting these wakes idle workers through LISTEN/NOTIFY instead of waiting for the next poll.
    "NOTIFY_EVENT_TYPES": env.list(
        "EVENTBUS_NOTIFY_EVENT_TYPES", default=["message.received", "ai.handoff_triggered"]
    ),
    # Extra modules imported at start-up to register consumers and event types (tests use it).
    "HANDLER_MODULES": env.list("EVENTBUS_HANDLER_MODULES", default=[]),
    # Dotted paths of callables `fn(deliveries)` called when work dies (after the ERROR log line).
    "DEAD_LETTER_HOOKS": env.list("EVENTBUS_DEAD_LETTER_HOOKS", default=[]),
    # DLQ growth alert: this many deliveries of one consumer dying within the interval alerts
    # ADMINS (and the webhook, when set), at most once per interval per consumer.
    "DLQ_ALERT_THRESHOLD": env.int("EVENTBUS_DLQ_ALERT_THRESHOLD", default=10),
    "DLQ_ALERT_INTERVAL": env.float("EVENTBUS_DLQ_ALERT_INTERVAL", default=3600.0),
    # Slack-compatible incoming-webhook URL (a secret: environment only); empty = mail only.
    "DLQ_ALERT_WEBHOOK_URL": env.str("EVENTBUS_DLQ_ALERT_WEBHOOK_URL", default=""),
}
