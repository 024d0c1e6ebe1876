"""The project's own health checks: database, storage and the optional Redis/RabbitMQ broker.

Integrations (WAHA, Nuvemshop...) register theirs from their app's `ready()` with
`core.health.registry.register`. The broker check follows the job broker's choice (jobs.brokers):
Redis or RabbitMQ when their URL is set, else dramatiq's queue table in PostgreSQL.
"""

from __future__ import annotations

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection

from core.health import registry as health


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def check_storage() -> None:
    """Write, read back and delete a small file: proves the volume is mounted and writable."""
    name = default_storage.save("health/probe.txt", ContentFile(b"ok"))
    try:
        with default_storage.open(name) as handle:
            if handle.read() != b"ok":
                raise OSError("storage read back different content")
    finally:
        default_storage.delete(name)


# The Postgres broker's queue table (dramatiq-postgres); a cheap probe that it is reachable.
POSTGRES_QUEUE_PROBE_SQL = "SELECT 1 FROM dramatiq.queue LIMIT 1"


def check_broker() -> None:
    """PING Redis, open and close an AMQP connection, or query the Postgres queue table."""
    timeout = float(settings.HEALTH["CHECK_TIMEOUT"])
    if not (settings.REDIS_URL or settings.RABBITMQ_URL):
        _check_postgres_broker(timeout)
        return
    if settings.REDIS_URL:
        import redis

        client = redis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        try:
            client.ping()
        finally:
            client.close()
        return
    import kombu

    with kombu.Connection(settings.RABBITMQ_URL, connect_timeout=timeout) as amqp:
        # One try, no sleeping between tries: the health answer has a budget.
        amqp.ensure_connection(
            max_retries=1, interval_start=0, interval_step=0, interval_max=0, timeout=timeout
        )


def register_defaults() -> None:
    health.register("database", check_database)
    health.register("storage", check_storage)
    health.register("broker", check_broker)


def _check_postgres_broker(timeout: float) -> None:
    url = str(getattr(settings, "JOBS_BROKER_DATABASE_URL", "") or "")
    if not url:  # the queue lives in the application's own database
        with connection.cursor() as cursor:
            cursor.execute(POSTGRES_QUEUE_PROBE_SQL)
        return
    import psycopg

    with psycopg.connect(url, connect_timeout=max(1, int(timeout))) as conn:
        conn.execute(POSTGRES_QUEUE_PROBE_SQL)
