"""Broker-run consumers across real processes: `drain_events` (relay) and `rundramatiq` (jobs).

Always against the Postgres broker; against Redis and RabbitMQ when they answer on their default
ports (skipped with the reason otherwise). A loopback TCP forwarder stands between the relay and
the broker, so "broker down" is a refused connection and "back up" the same port answering again.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.db import connection

import eventbus
from core.models import Organization
from crm.models import Order
from crm.services import order_confirm
from eventbus.store.models import Delivery
from tests.support.db import database_url, side_effect_rows
from tests.support.processes import Managed, start_jobs
from tests.support.proxy import TcpProxy, free_port, reachable
from tests.support.waiting import wait_for

# One xdist worker for the whole module: the real Redis (db 15) and RabbitMQ (the default vhost)
# are one server each for every worker, so two workers' relays and jobs processes would take
# each other's messages ("stale message" in the other's database) and purge each other's queues.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.slow,
    pytest.mark.xdist_group("brokers"),
]

REDIS_PORT, RABBITMQ_PORT = 6379, 5672


def postgres_port() -> int:
    """The test database's server port (5432 here, the embedded server's on a fresh machine)."""
    return int(connection.settings_dict["PORT"] or 5432)


TEST_QUEUES = ("eventbus", "jobs")
FAST_RELAY = {
    "OUTBOX_POLL_INTERVAL_MS": "200",
    "EVENTBUS_RETRY_SCHEDULE": "0.5",
    "EVENTBUS_RETRY_JITTER": "0",
    "OUTBOX_MAX_ATTEMPTS": "1000",
}


@dataclass(frozen=True)
class Backend:
    """How to point a process at one broker, directly or through a forwarder on `port`."""

    name: str
    port: int

    def env(self, port: int | None = None) -> dict[str, str]:
        port = port or self.port
        if self.name == "redis":
            return {"JOBS_BROKER": "redis", "REDIS_URL": f"redis://127.0.0.1:{port}/15"}
        if self.name == "rabbitmq":
            return {
                "JOBS_BROKER": "rabbitmq",
                "RABBITMQ_URL": f"amqp://guest:guest@127.0.0.1:{port}/",
            }
        url = database_url().replace(f":{postgres_port()}/", f":{port}/")
        return {"JOBS_BROKER": "postgres", "JOBS_BROKER_DATABASE_URL": url}

    def purge(self) -> None:
        """Forget messages earlier tests left in the test queues."""
        if self.name == "postgres":
            with connection.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM dramatiq.queue WHERE split_part(queue_name, '.', 1) = ANY(%s)",
                    [list(TEST_QUEUES)],
                )
        elif self.name == "redis":
            import redis

            client = redis.Redis.from_url(self.env()["REDIS_URL"])
            for queue in TEST_QUEUES:
                for key in client.scan_iter(f"dramatiq:{queue}*"):
                    client.delete(key)
        else:
            import pika

            with pika.BlockingConnection(pika.URLParameters(self.env()["RABBITMQ_URL"])) as conn:
                channel = conn.channel()
                for queue in TEST_QUEUES:
                    for name in (queue, f"{queue}.DQ", f"{queue}.XQ"):
                        channel.queue_delete(name)


BACKENDS = [
    pytest.param(Backend("postgres", 0), id="postgres"),  # port: the test database's
    pytest.param(Backend("redis", REDIS_PORT), id="redis"),
    pytest.param(Backend("rabbitmq", RABBITMQ_PORT), id="rabbitmq"),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    chosen: Backend = request.param
    if chosen.name == "postgres":
        chosen = Backend("postgres", postgres_port())
    if not reachable(chosen.port):
        pytest.skip(f"{chosen.name} is not reachable on 127.0.0.1:{chosen.port}")
    chosen.purge()
    return chosen


@pytest.fixture
def proxy(backend: Backend) -> Iterator[TcpProxy]:
    forwarder = TcpProxy(target=backend.port)
    yield forwarder
    forwarder.stop()


def all_done(delivery_ids: list[int]) -> bool:
    return Delivery.objects.filter(pk__in=delivery_ids).exclude(status="done").count() == 0


def test_orders_flow_through_the_relay_and_the_jobs_process_once(
    backend: Backend, org: Organization, side_effects: None, managed: list[Managed]
) -> None:
    orders = [
        order_confirm(organization=org, number=f"A-{i}", total_cents=100 * i) for i in range(10)
    ]
    delivery_ids = list(Delivery.objects.values_list("id", flat=True))
    assert len(delivery_ids) == 20  # order-post-worker + broker-order-effect-worker

    managed.append(start_jobs(**backend.env()))
    managed.append(Managed("drain_events", **backend.env(), **FAST_RELAY))
    wait_for(
        lambda: all_done(delivery_ids),
        timeout=60,
        what=lambda: f"all deliveries done; logs:\n{managed[0].output()}\n{managed[1].output()}",
    )

    assert sorted(runs for _, _, runs in side_effect_rows()) == [1] * 10
    assert Order.objects.filter(pk__in=[o.pk for o in orders], post_processed_at=None).count() == 0
    assert set(Delivery.objects.values_list("attempts", "publish_failures")) == {(1, 0)}


def test_broker_down_deliveries_wait_then_all_run_once_when_it_is_back(
    backend: Backend,
    proxy: TcpProxy,
    org: Organization,
    side_effects: None,
    managed: list[Managed],
) -> None:
    managed.append(start_jobs(**backend.env()))
    managed.append(Managed("drain_events", **backend.env(proxy.port), **FAST_RELAY))
    ids = eventbus.emit_many(
        [
            {"event_type": "test.broker", "entity_kind": "thing", "payload": {"n": i}}
            for i in range(8)
        ],
        organization=org,
    )  # the write succeeds with the broker down
    delivery_ids = list(Delivery.objects.filter(event_id__in=ids).values_list("id", flat=True))

    def all_failed_to_publish() -> bool:
        rows = Delivery.objects.filter(pk__in=delivery_ids)
        return all(d.publish_failures >= 1 and d.status != "done" for d in rows)

    wait_for(all_failed_to_publish, timeout=30, what="publish failures while the broker is down")
    assert side_effect_rows() == []

    proxy.start()
    wait_for(
        lambda: all_done(delivery_ids),
        timeout=90,
        what=lambda: f"deliveries done after the broker came back:\n{managed[1].output()}",
    )
    assert sorted(runs for _, _, runs in side_effect_rows()) == [1] * 8
    assert set(Delivery.objects.filter(pk__in=delivery_ids).values_list("attempts", flat=True)) == {
        1
    }  # publish failures never cost a consumer attempt


@pytest.mark.parametrize("name", ["postgres", "redis", "rabbitmq"])
def test_the_web_process_starts_and_accepts_writes_with_the_broker_down(
    name: str, org: Organization
) -> None:
    closed = Backend(name, free_port())
    number = f"W-{uuid.uuid4().hex[:8]}"
    script = (
        "from core.models import Organization; from crm.services import order_confirm; "
        f"order_confirm(organization=Organization.objects.get(pk='{org.pk}'), "
        f"number='{number}', total_cents=990)"
    )
    shell = Managed("shell", "-c", script, **closed.env())
    try:
        assert shell.wait(timeout=60) == 0, shell.output()
    finally:
        shell.close()
    order = Order.objects.get(number=number)
    assert order.status == "confirmed"
    assert Delivery.objects.filter(event__entity_id=order.pk, status="pending").count() == 2
