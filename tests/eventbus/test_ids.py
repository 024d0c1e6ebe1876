"""Event ids are UUID version 7: time-ordered, random after the millisecond."""

from __future__ import annotations

import time
import uuid

import pytest

import eventbus
from core.models import Organization
from eventbus.store.ids import uuid7


def test_layout_is_rfc_9562_version_7() -> None:
    ms = 1_764_400_000_123
    value = uuid7(now_ms=ms)
    assert value.version == 7
    assert value.variant == uuid.RFC_4122
    assert value.int >> 80 == ms
    assert uuid7(now_ms=ms) != value  # 74 random bits


def test_ids_sort_by_millisecond() -> None:
    ids = [uuid7(now_ms=ms) for ms in (1_000, 1_001, 5_000, 2**48 - 1)]
    assert sorted(ids) == ids
    before = time.time_ns() // 1_000_000
    now = uuid7().int >> 80
    assert before <= now <= time.time_ns() // 1_000_000


@pytest.mark.django_db
def test_emitted_events_get_version_7_ids(org: Organization) -> None:
    one = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    many = eventbus.emit_many(
        [{"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 2}}], organization=org
    )
    assert {one.pk.version, *(i.version for i in many)} == {7}
