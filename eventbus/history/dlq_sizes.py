"""The DLQ's size per event type, consumer and organization (the status page and /metrics).

Counted live from the dead letters' own index by a loose scan (`sql/dlq_sizes.sql`): no
counter table to keep right, nothing added to the claim or the settles, and the cost is one
read of the dead rows' index entries, without hashing or sorting them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eventbus.store.sql import statement


@dataclass(frozen=True)
class DlqSize:
    event_type: str
    consumer: str
    organization_id: uuid.UUID
    dead: int


def dlq_sizes(cursor: Any) -> list[DlqSize]:
    """Every (event type, consumer, organization) with dead letters, and how many, read with
    `cursor` (the caller's connection: the primary, or the replica for read-only pages)."""
    cursor.execute(statement("dlq_sizes"))
    return [DlqSize(*row) for row in cursor.fetchall()]


def per_organization(sizes: Iterable[DlqSize]) -> dict[uuid.UUID, int]:
    totals: dict[uuid.UUID, int] = {}
    for size in sizes:
        totals[size.organization_id] = totals.get(size.organization_id, 0) + size.dead
    return totals
