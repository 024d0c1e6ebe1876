"""Nuvemshop full-sync benchmark: orders/s through the real sync path against the loopback fake.

Run from the repository root with the project's interpreter:

    .venv/bin/python bench/nuvemshop.py [--orders N] [--per-page P] [--repeat K]

What it measures, in one run, against one PostgreSQL server and the fake of tests/support:

1. Baseline: the same N orders (each with one of N/20 customers) upserted straight into the CRM
   with `nuvemshop.upserts.order_upsert`, one transaction per page of P: the database work alone.
2. Full sync: `nuvemshop.full_resync` emitted, then `nuvemshop-sync-worker` run in-process until
   nothing is due: per page one API call (HTTP to the fake, the shared limiter's statement), the
   upserts, the cursor's advance and the next page's event, claimed and acked by the bus. The
   rate limit is raised out of the way (this measures the machinery, not the 300/min cap).
3. Limiter: `nuvemshop.ratelimit.acquire` calls/s in one process with a limit that never waits
   (the cost of one shared token: one UPDATE ... RETURNING).

Figures are medians of `--repeat` runs; the last column divides by the baseline; the last line of
stdout is `nuvemshop_sync_ratio_to_upsert=<x>`. Everything runs in a scratch database
`<dbname>_bench_nuvemshop` created and migrated on the server named by DATABASE_URL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from bench.drain import (  # noqa: E402  (the repository root must be importable first)
    Admin,
    child_env,
    recreate_scratch,
    say,
    scratch_beside,
)

SHOP_TABLES = (
    "deskcomm_order",
    "deskcomm_contact",
    "nuvemshop_customerlink",
    "nuvemshop_synccursor",
    "nuvemshop_ratebucket",
    "event_log",
    "eventbus_delivery",
)


@dataclass(frozen=True)
class Config:
    orders: int
    per_page: int
    repeat: int
    base_url: str
    scratch_name: str
    scratch_url: str
    admin_conninfo: str
    scratch_conninfo: str


def parse_args(argv: Sequence[str] | None) -> Config:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--orders", type=int, default=2000)
    parser.add_argument("--per-page", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    return Config(
        orders=args.orders,
        per_page=args.per_page,
        repeat=args.repeat,
        **scratch_beside("bench_nuvemshop"),
    )


def shop_orders(n: int) -> list[dict[str, Any]]:
    from tests.support.nuvemshop import customer, order

    buyers = [customer(i) for i in range(1, max(2, n // 20) + 1)]
    return [order(100_000 + i, number=i, buyer=buyers[i % len(buyers)]) for i in range(n)]


def reset(admin: Admin) -> None:
    admin.conn.execute(f"TRUNCATE {', '.join(SHOP_TABLES)} CASCADE")
    admin.settle(SHOP_TABLES)


def baseline(admin: Admin, store: Any, orders: list[dict[str, Any]], per_page: int) -> float:
    from django.db import transaction

    from nuvemshop import upserts

    reset(admin)
    started = time.perf_counter()
    for start in range(0, len(orders), per_page):
        with transaction.atomic():
            for item in orders[start : start + per_page]:
                upserts.order_upsert(store, item)
    return len(orders) / (time.perf_counter() - started)


def full_sync(admin: Admin, store: Any, n: int) -> float:
    from crm.models import Order
    from eventbus.dispatch.worker import Worker, WorkerOptions
    from nuvemshop import services
    from nuvemshop.handlers import SYNC_CONSUMER

    reset(admin)
    started = time.perf_counter()
    services.full_resync_request(store=store, actor="bench")
    worker = Worker(WorkerOptions(consumers=[SYNC_CONSUMER], listen=False))
    while worker.run_once():
        pass
    elapsed = time.perf_counter() - started
    if Order.objects.count() != n:
        raise RuntimeError(f"expected {n} orders, found {Order.objects.count()}")
    return n / elapsed


def limiter(admin: Admin, calls: int) -> float:
    from nuvemshop import ratelimit

    reset(admin)
    started = time.perf_counter()
    for _ in range(calls):
        ratelimit.acquire(789)
    return calls / (time.perf_counter() - started)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse_args(argv)
    recreate_scratch(config)  # type: ignore[arg-type]
    os.environ.update(child_env(config))  # type: ignore[arg-type]
    os.environ.update(
        {
            "NUVEMSHOP_PER_PAGE": str(config.per_page),
            "NUVEMSHOP_RATE_LIMIT_REQUESTS": "100000000",
            "NUVEMSHOP_ALLOW_PRIVATE_HOSTS": "true",
            "DB_RLS_BYPASS": "true",
        }
    )
    from tests.support.nuvemshop import fake_nuvemshop

    with fake_nuvemshop() as fake:
        os.environ.update(fake.env())
        import django

        django.setup()
        from core.models import Organization
        from nuvemshop.models import Store

        shop = fake.add_store(789, token="tok-789")
        shop.orders.extend(shop_orders(config.orders))
        org = Organization.objects.create(name="Bench", slug="bench")
        store = Store(organization=org, ns_store_id=789)
        store.access_token = shop.token
        store.save()
        admin = Admin(config.scratch_conninfo)
        results: dict[str, list[float]] = {"upsert": [], "sync": [], "limiter": []}
        try:
            for run in range(config.repeat):
                say(f"run {run + 1}/{config.repeat}")
                results["upsert"].append(baseline(admin, store, shop.orders, config.per_page))
                results["sync"].append(full_sync(admin, store, config.orders))
                results["limiter"].append(limiter(admin, 2000))
        finally:
            admin.close()
    render(config, results)
    return 0


def render(config: Config, results: dict[str, list[float]]) -> None:
    base = statistics.median(results["upsert"])
    print(f"Nuvemshop full sync, {config.orders} orders, {config.per_page} per page")
    print(f"{'measurement':<40} {'median/s':>10} {'runs':>30} {'/ upsert':>9}")
    for key, label in (
        ("upsert", "upsert only (orders/s, baseline)"),
        ("sync", "full sync via the worker (orders/s)"),
        ("limiter", "shared limiter tokens (acquire/s)"),
    ):
        median = statistics.median(results[key])
        runs = ", ".join(f"{value:.0f}" for value in results[key])
        print(f"{label:<40} {median:>10.0f} {runs:>30} {median / base:>9.2f}")
    print(f"nuvemshop_sync_ratio_to_upsert={statistics.median(results['sync']) / base:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
