"""Every environment setting the code reads is documented in `.env.example`."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV_READ = re.compile(r"""env(?:\.\w+)?\(\s*["']([A-Z][A-Z0-9_]+)["']""")


def documented() -> set[str]:
    lines = (REPO / ".env.example").read_text().splitlines()
    return {line.split("=", 1)[0] for line in lines if re.match(r"^[A-Z][A-Z0-9_]*=", line)}


def test_every_setting_is_in_env_example() -> None:
    read = set(ENV_READ.findall((REPO / "deskcomm" / "settings.py").read_text()))
    assert read, "the pattern no longer finds env reads in settings.py"
    assert read - documented() == set()


def test_the_job_broker_follows_the_environment() -> None:
    import pytest

    from deskcomm.broker_config import BrokerConfigError, choose_backend, dramatiq_broker

    assert choose_backend(explicit="", redis_url="", rabbitmq_url="") == "postgres"
    assert choose_backend(explicit="", redis_url="redis://r:6379", rabbitmq_url="") == "redis"
    assert choose_backend(explicit="", redis_url="", rabbitmq_url="amqp://q") == "rabbitmq"
    assert (
        choose_backend(explicit="redis", redis_url="redis://r", rabbitmq_url="amqp://q") == "redis"
    )
    with pytest.raises(BrokerConfigError, match="choose one with JOBS_BROKER"):
        choose_backend(explicit="", redis_url="redis://r", rabbitmq_url="amqp://q")
    with pytest.raises(BrokerConfigError, match="JOBS_BROKER must be one of"):
        choose_backend(explicit="kafka", redis_url="", rabbitmq_url="")
    redis = dramatiq_broker(backend="redis", redis_url="", rabbitmq_url="", postgres_url="")
    assert redis["OPTIONS"] == {"url": "redis://localhost:6379"}  # seed 004 default
    postgres = dramatiq_broker(backend="postgres", redis_url="", rabbitmq_url="", postgres_url="")
    assert postgres["BROKER"] == "deskcomm.brokers.PostgresBroker"
    assert "django_dramatiq.middleware.DbConnectionsMiddleware" in postgres["MIDDLEWARE"]
