"""Every emit path copies the event type onto its deliveries (per-type metrics without joins)."""

from __future__ import annotations

import pytest

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery
from tests.eventbus.test_emitter import emit_sql

pytestmark = pytest.mark.django_db


def types_of(event_id: object) -> set[str]:
    return set(Delivery.objects.filter(event_id=event_id).values_list("event_type", flat=True))


def test_emit_emit_many_and_sql_emit_event_set_the_delivery_event_type(
    org: Organization,
) -> None:
    one = eventbus.emit("test.effect", organization=org, entity_kind="t", payload={"n": 1})
    flaky, effect = eventbus.emit_many(
        [
            {"event_type": "test.flaky", "entity_kind": "t", "payload": {"n": 2}},
            {"event_type": "test.effect", "entity_kind": "t", "payload": {"n": 3}},
        ],
        organization=org,
    )
    from_sql = emit_sql("test.effect", "t", None, '{"n": 4}', "{}", org.pk)
    assert types_of(one.pk) == {"test.effect"}
    assert types_of(flaky) == {"test.flaky"}
    assert types_of(effect) == {"test.effect"}
    assert types_of(from_sql) == {"test.effect"}
    assert Delivery.objects.count() == 3 + 1 + 3 + 3
