"""The full sync in real `drain_events` subprocesses against the fake: a worker SIGKILLed
halfway through 2,000 orders (20 pages) and another resuming from the cursor; two workers
sharing the store's rate limit (the fake counts every request's arrival)."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from core.models import Organization
from crm.models import Order
from eventbus.store.models import Delivery
from nuvemshop import services
from nuvemshop.handlers import SYNC_CONSUMER
from nuvemshop.models import Store, SyncCursor
from tests.support.nuvemshop import (
    FakeNuvemshop,
    FakeStore,
    customer,
    fake_nuvemshop,
    order,
    product,
)
from tests.support.processes import Drain, start_drain
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

DRAIN_ARGS = ("--consumer", SYNC_CONSUMER, "--batch-size", "1", "--poll-interval", "0.1")


@pytest.fixture
def live_fake(settings: Any) -> Iterator[FakeNuvemshop]:
    with fake_nuvemshop() as server:
        settings.NUVEMSHOP = server.settings()
        yield server


def connected(org: Organization, shop: FakeStore) -> Store:
    store = Store(organization=org, ns_store_id=shop.store_id, name="Loja")
    store.access_token = shop.token
    store.save()
    return store


def cursor(resource: str) -> SyncCursor | None:
    return SyncCursor.objects.filter(resource=resource).first()


def pages_done(resource: str) -> int:
    found = cursor(resource)
    return found.pages_done if found else 0


def finished(resource: str) -> bool:
    found = cursor(resource)
    return bool(found and found.finished_at)


def page_requests(fake: FakeNuvemshop) -> Counter[int]:
    return Counter(int(hit.query.get("page", 1)) for hit in fake.api_hits("/v1/789/orders"))


@pytest.mark.slow
def test_a_worker_killed_halfway_is_resumed_from_the_cursor_without_duplicates(
    org: Organization, live_fake: FakeNuvemshop, processes: list[Drain]
) -> None:
    shop = live_fake.add_store(789, token="tok-789")
    buyers = [customer(i) for i in range(1, 41)]
    shop.customers.extend(buyers)
    shop.orders.extend(
        order(100_000 + i, number=1000 + i, buyer=buyers[i % 40]) for i in range(2000)
    )
    live_fake.latency = 0.2  # a slow shop: the kill lands mid-sync
    store = connected(org, shop)
    services.full_resync_request(store=store, actor="test")
    env = {**live_fake.env(), "EVENTBUS_LEASE_SECONDS": "3"}
    first = start_drain(*DRAIN_ARGS, **env)
    processes.append(first)
    wait_for(lambda: pages_done("orders") >= 8, timeout=180, what=first.output)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    killed_at = pages_done("orders")
    assert 8 <= killed_at < 20
    second = start_drain(*DRAIN_ARGS, **env)
    processes.append(second)
    wait_for(lambda: finished("orders"), timeout=300, what=second.output)
    ids = list(Order.objects.filter(organization=org).values_list("ns_order_id", flat=True))
    assert len(ids) == 2000 and set(ids) == {100_000 + i for i in range(2000)}
    requested = page_requests(live_fake)
    assert set(requested) == set(range(1, 21))
    assert requested[1] == 1  # resumed from the cursor, not restarted
    assert max(requested.values()) <= 2  # at most the page in flight at the kill, again
    assert sum(requested.values()) <= 21
    store.refresh_from_db()
    wait_for(
        lambda: Store.objects.get(pk=store.pk).last_sync_at is not None,
        timeout=60,
        what="the run's end",
    )
    assert Store.objects.get(pk=store.pk).orders_count == 2000
    # Nothing is left stuck: the last page's delivery is acked once its handler returned (the
    # second worker may still be settling it when the cursor says finished).
    wait_for(
        lambda: not Delivery.objects.filter(status="processing").exists(),
        timeout=60,
        what=lambda: f"deliveries still processing: {second.output()}",
    )


@pytest.mark.slow
def test_two_workers_never_exceed_the_stores_shared_rate_limit(
    org: Organization, live_fake: FakeNuvemshop, processes: list[Drain]
) -> None:
    shop = live_fake.add_store(789, token="tok-789")
    shop.products.extend(product(i) for i in range(1, 101))
    shop.customers.extend(customer(i) for i in range(1, 101))
    shop.orders.extend(order(5000 + i, number=i) for i in range(100))
    store = connected(org, shop)
    services.full_resync_request(store=store, actor="test")
    limit, window = 30, 10.0
    env = {
        **live_fake.env(),
        "NUVEMSHOP_PER_PAGE": "5",  # 20 pages per resource: 60 requests in three chains
        "NUVEMSHOP_RATE_LIMIT_REQUESTS": str(limit),
        "NUVEMSHOP_RATE_LIMIT_WINDOW_SECONDS": str(window),
    }
    workers = [start_drain(*DRAIN_ARGS, **env) for _ in range(2)]
    processes.extend(workers)
    wait_for(
        lambda: all(finished(r) for r in ("products", "customers", "orders")),
        timeout=240,
        what=lambda: "\n".join(w.output()[-2000:] for w in workers),
    )
    assert len(live_fake.api_hits("/v1/789/")) == 60  # twice the limit: it had to hold back
    assert live_fake.max_in_window(window) <= limit
    # Both processes ran sync pages (each one's requests): the limit held across them. A
    # settled delivery keeps `locked_by`, its worker's host:pid.
    ran_pages = Delivery.objects.filter(consumer=SYNC_CONSUMER, status="done")
    pids = {
        int(locker.rsplit(":", 1)[1]) for locker in ran_pages.values_list("locked_by", flat=True)
    }
    assert pids == {worker.pid for worker in workers}
