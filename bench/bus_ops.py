"""The Django side of bench/drain.py: the benchmark organization and the emit calls.

Import only after `django.setup()` (bench/drain.py points Django at the scratch database first).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db import transaction

import eventbus
from bench.bench_consumers import ENTITY_KIND, ORDERED_EVENT, ORDERED_KEYS
from core.models import Organization

Item = dict[str, Any]


def create_organization() -> Organization:
    return Organization.objects.create(name="Bench", slug=f"bench-{uuid.uuid4().hex[:8]}")


def items(event_type: str, n: int) -> list[Item]:
    """`n` emit_many items of one type (built before any clock starts); those of the ordered
    type go to ORDERED_KEYS conversations in turn."""
    keys = [str(uuid.uuid4()) for _ in range(ORDERED_KEYS)]
    built: list[Item] = [
        {
            "event_type": event_type,
            "entity_kind": ENTITY_KIND,
            "entity_id": uuid.uuid4(),
            "payload": {"seq": i, "note": "benchmark"},
        }
        for i in range(n)
    ]
    if event_type == ORDERED_EVENT:
        for i, item in enumerate(built):
            item["payload"]["conversation_id"] = keys[i % ORDERED_KEYS]
    return built


def emit_loop(org: Organization, batch: list[Item]) -> float:
    """`eventbus.emit` once per item, all inside one transaction; seconds including the commit."""
    started = time.perf_counter()
    with transaction.atomic():
        for item in batch:
            eventbus.emit(
                item["event_type"],
                organization=org,
                entity_kind=item["entity_kind"],
                entity_id=item["entity_id"],
                payload=item["payload"],
            )
    return time.perf_counter() - started


def emit_many(org: Organization, batch: list[Item], chunk: int) -> float:
    """`eventbus.emit_many` per chunk, one transaction each; seconds for all chunks."""
    started = time.perf_counter()
    for start in range(0, len(batch), chunk):
        with transaction.atomic():
            eventbus.emit_many(batch[start : start + chunk], organization=org)
    return time.perf_counter() - started
