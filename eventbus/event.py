"""The value handed to consumers: one event as seen by one delivery."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    """An event, read once by the claim (no ORM object per row on the hot path).

    `consumer`, `delivery_id` and `attempt` say which delivery is running (attempt is 1-based).
    """

    id: uuid.UUID
    organization_id: uuid.UUID
    event_type: str
    entity_kind: str
    entity_id: uuid.UUID | None
    payload: dict[str, Any]
    metadata: dict[str, Any]
    created_at: dt.datetime
    consumer: str = ""
    delivery_id: int = 0
    attempt: int = 0
    max_attempts: int = 0

    @property
    def request_id(self) -> str | None:
        value = self.metadata.get("request_id")
        return str(value) if value is not None else None
