"""Broker-run consumers as dramatiq actors (discovered by `manage.py rundramatiq`): one per
consumer declared `runs_on="broker"`, named after it, all on the `eventbus` queue. The relay
publishes their deliveries (message id = delivery id); the database owns retries and the DLQ, so
dramatiq never retries them (max_retries=0)."""

from __future__ import annotations

from collections.abc import Callable

from eventbus.dispatch.relay import BROKER_QUEUE, run_published
from eventbus.store.registry import registry
from jobs.registry import declare_actor


def _runner(consumer: str) -> Callable[[int, str], None]:
    def run(delivery_id: int, lease_token: str) -> None:
        run_published(delivery_id, lease_token, consumer)

    return run


ACTORS = {
    consumer.name: declare_actor(
        consumer.name, _runner(consumer.name), queue_name=BROKER_QUEUE, max_retries=0
    )
    for consumer in registry.running_on("broker")
}
