"""core.api.serializers.ReusedFields: fields copied once per class and thread, results unchanged."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from rest_framework import serializers

from core.api.serializers import ReusedFields
from eventbus.api.serializers import (
    EmitSerializer,
    EventDetailSerializer,
    EventFilterSerializer,
    EventSerializer,
)


class Plain(serializers.Serializer):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(min_value=0, required=False, default=3)
    tags = serializers.ListField(child=serializers.CharField(), required=False, default=list)


class Reused(ReusedFields, Plain):
    pass


class WithNested(Reused):
    inner = Plain(required=False)


def validate(cls: type[serializers.Serializer], data: dict[str, Any]) -> tuple[bool, Any]:
    serializer = cls(data=data)
    valid = serializer.is_valid()
    return valid, serializer.validated_data if valid else serializer.errors


CASES: list[dict[str, Any]] = [
    {"name": "ok", "count": 1, "tags": ["a"]},
    {"name": "far too long", "count": -1},
    {"name": "ok"},
    {"count": "x", "tags": "not a list"},
    {"name": "again", "tags": ["b", "c"]},
]


def test_results_and_errors_match_drf_call_after_call() -> None:
    # A reused field must carry nothing from one call to the next: errors, defaults, values.
    for data in CASES * 2:
        assert validate(Reused, data) == validate(Plain, data)


def test_one_copy_per_thread_bound_to_the_instance_in_use() -> None:
    first, second = Reused(data={}), Reused(data={})
    first_fields = dict(first.fields)
    second_fields = dict(second.fields)
    assert all(first_fields[name] is second_fields[name] for name in first_fields)
    assert all(field.parent is second for field in second_fields.values())
    assert Plain().fields["name"] is not Plain().fields["name"]  # DRF copies per instance

    seen: list[Any] = []
    thread = threading.Thread(target=lambda: seen.append(Reused().fields["name"]))
    thread.start()
    thread.join()
    assert seen[0] is not first_fields["name"]


def test_a_nested_serializer_keeps_drf_copies() -> None:
    assert Reused.reuses_fields and not WithNested.reuses_fields
    assert WithNested().fields["name"] is not WithNested().fields["name"]
    assert not EventDetailSerializer.reuses_fields
    assert EmitSerializer.reuses_fields and EventSerializer.reuses_fields


@pytest.mark.parametrize(
    "body",
    [
        {"event_type": "lead.created", "entity_kind": "lead", "payload": {"a": 1}},
        {"event_type": "Bad Type", "entity_kind": 5},
        {"event_type": "lead.created", "entity_kind": "lead", "organization": "x"},
        {"event_type": "lead.created", "entity_kind": "lead", "priority": 11},
        {"event_type": "lead.created", "entity_kind": "lead", "entity_id": str(uuid.uuid4())},
    ],
)
def test_the_emit_serializer_answers_as_before(body: dict[str, Any]) -> None:
    class Copying(EmitSerializer):
        reuses_fields = False

    assert Copying().fields["event_type"] is not Copying().fields["event_type"]
    for _ in range(2):
        assert validate(EmitSerializer, body) == validate(Copying, body)


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"status": "dead", "limit": "10", "event_type": "lead.created"},
        {"status": "nope", "limit": "0", "entity_id": "not-a-uuid"},
        {"created_after": "2026-01-01T00:00:00Z", "consumer": "crm-worker", "limit": "999"},
        {"cursor": "garbage", "organization": "x"},
    ],
)
def test_the_event_filter_serializer_answers_as_before(query: dict[str, Any]) -> None:
    class Copying(EventFilterSerializer):
        reuses_fields = False

    assert EventFilterSerializer.reuses_fields
    for _ in range(2):
        assert validate(EventFilterSerializer, query) == validate(Copying, query)
