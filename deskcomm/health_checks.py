"""The project's own health checks: database, storage and the optional Redis/RabbitMQ broker.

Integrations (WAHA, Nuvemshop...) register theirs from their app's `ready()` with
`deskcomm.health.register`. The default Postgres broker lives in the database, so the database
check covers it until the jobs app registers a "broker" check of its own.
"""

from __future__ import annotations

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connection

from deskcomm import health


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


def broker_configured() -> bool:
    return bool(settings.REDIS_URL or settings.RABBITMQ_URL)


def check_broker() -> None:
    """PING Redis, or open and close an AMQP connection, with short socket timeouts."""
    timeout = float(settings.HEALTH["CHECK_TIMEOUT"])
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
    health.register("broker", check_broker, enabled=broker_configured)
