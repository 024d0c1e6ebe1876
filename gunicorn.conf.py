"""Gunicorn settings for the web process (`gunicorn deskcomm.wsgi`, read from the working dir).

Sized for a small host (2 cores): threaded workers, because an API request spends much of its time
waiting on PostgreSQL (the GIL is released then), so a few processes with several threads each
keep both cores busy with fewer database connections than many single-threaded processes.
Each thread keeps one database connection (DB_CONN_MAX_AGE): workers x threads connections.
All knobs come from the environment (see .env.example).
"""

from __future__ import annotations

import os

bind = os.environ.get("GUNICORN_BIND", f"0.0.0.0:{os.environ.get('PORT', '8000')}")
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "gthread"
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
# Keep-alive lets an integrator reuse its connection; gthread workers support it.
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "5"))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = int(os.environ.get("GUNICORN_GRACEFUL_TIMEOUT", "30"))
# Recycle workers now and then (jittered so they do not restart together).
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "10000"))
max_requests_jitter = max_requests // 10
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None  # "-" for stdout
logger_class = "core.logs.access.Logger"  # builds no access line unless accesslog is set
errorlog = "-"
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "info")

# gunicorn's own lines (start, worker boot/exit, access log) in the same JSON shape as the app's
# (core.logs.formatters, which needs no Django), unless LOG_FORMAT=plain.
_debug = os.environ.get("DEBUG", "false").lower() in {"1", "true", "yes", "on"}
if (os.environ.get("LOG_FORMAT") or ("plain" if _debug else "json")) == "json":
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "json": {
                "()": "core.logs.formatters.JsonFormatter",
                "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
            }
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stdout",
            }
        },
        "loggers": {
            "gunicorn.error": {
                "handlers": ["console"],
                "level": loglevel.upper(),
                "propagate": False,
            },
            # gunicorn writes access lines whenever a logging config is given: off here unless
            # GUNICORN_ACCESS_LOG asks for them (each line costs the request a JSON record).
            "gunicorn.access": {
                "handlers": ["console"] if accesslog else [],
                "level": "INFO" if accesslog else "CRITICAL",
                "propagate": False,
            },
        },
    }


def on_starting(server: object) -> None:
    """Multiprocess metrics (core.metrics): start from an empty directory."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        os.makedirs(directory, exist_ok=True)
        for name in os.listdir(directory):
            if name.endswith(".db"):
                os.remove(os.path.join(directory, name))


def child_exit(server: object, worker: object) -> None:
    """A recycled worker's live gauges must not linger in the multiprocess directory."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[attr-defined]
