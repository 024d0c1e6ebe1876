"""Which dramatiq broker to use, from the environment (pure: imported by settings.py).

The Postgres broker on the project's own database is the default, so a fresh install needs only
PostgreSQL and a job enqueued inside a transaction commits (or rolls back) with it. `REDIS_URL` or
`RABBITMQ_URL` switch to Redis or RabbitMQ; `JOBS_BROKER` names the broker when both are set.
"""

from __future__ import annotations

from typing import Any

BACKENDS = ("postgres", "redis", "rabbitmq")
SEED_REDIS_URL = "redis://localhost:6379"  # seed 004 §5 default, used when JOBS_BROKER=redis

# Every broker gets dramatiq's defaults plus Django connection hygiene for worker threads.
MIDDLEWARE = [
    "dramatiq.middleware.AgeLimit",
    "dramatiq.middleware.TimeLimit",
    "dramatiq.middleware.ShutdownNotifications",
    "dramatiq.middleware.Callbacks",
    "dramatiq.middleware.Pipelines",
    "dramatiq.middleware.Retries",
    "django_dramatiq.middleware.DbConnectionsMiddleware",
    "jobs.brokers.WorkerDatabaseTimeouts",
    "jobs.brokers.WorkerPresence",
]


class BrokerConfigError(ValueError):
    """The broker settings contradict each other."""


def choose_backend(*, explicit: str, redis_url: str, rabbitmq_url: str) -> str:
    """`JOBS_BROKER` if given, else RabbitMQ/Redis when only its URL is set, else Postgres."""
    if explicit:
        if explicit not in BACKENDS:
            raise BrokerConfigError(f"JOBS_BROKER must be one of {BACKENDS}, got {explicit!r}")
        return explicit
    if redis_url and rabbitmq_url:
        raise BrokerConfigError(
            "both REDIS_URL and RABBITMQ_URL are set: choose one with JOBS_BROKER=redis|rabbitmq"
        )
    if rabbitmq_url:
        return "rabbitmq"
    return "redis" if redis_url else "postgres"


def dramatiq_broker(
    *, backend: str, redis_url: str, rabbitmq_url: str, postgres_url: str
) -> dict[str, Any]:
    """The `DRAMATIQ_BROKER` setting for django-dramatiq (always explicit: its default is broken
    on dramatiq 2.x)."""
    if backend == "redis":
        broker = "dramatiq.brokers.redis.RedisBroker"
        options: dict[str, Any] = {"url": redis_url or SEED_REDIS_URL}
    elif backend == "rabbitmq":
        broker = "dramatiq.brokers.rabbitmq.RabbitmqBroker"
        options = {"url": rabbitmq_url or "amqp://guest:guest@localhost:5672/"}
    else:
        # Empty url: the project's own database (resolved at connect time), transactional.
        broker = "jobs.brokers.PostgresBroker"
        options = {"url": postgres_url}
    return {"BROKER": broker, "OPTIONS": options, "MIDDLEWARE": list(MIDDLEWARE)}
