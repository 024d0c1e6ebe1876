"""Fixtures of the Nuvemshop tests: the loopback fake with settings pointing at it, a connected
store, and an in-process run of the sync worker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from core.models import Organization
from eventbus.dispatch.worker import Worker, WorkerOptions
from nuvemshop.handlers import SYNC_CONSUMER
from nuvemshop.models import Store
from tests.support.nuvemshop import FakeNuvemshop, FakeStore, fake_nuvemshop


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeNuvemshop]:
    with fake_nuvemshop() as server:
        settings.NUVEMSHOP = {**server.settings()}
        yield server


@pytest.fixture
def shop(fake: FakeNuvemshop) -> FakeStore:
    return fake.add_store(789, token="tok-789")


@pytest.fixture
def store(org: Organization, shop: FakeStore) -> Store:
    connected = Store(organization=org, ns_store_id=shop.store_id, name="Loja")
    connected.access_token = shop.token
    connected.save()
    return connected


def drain(consumers: tuple[str, ...] = (SYNC_CONSUMER,)) -> int:
    """Run the given consumers in-process until nothing is due."""
    worker = Worker(WorkerOptions(consumers=list(consumers), listen=False))
    total = 0
    while claimed := worker.run_once():
        total += claimed
    return total
