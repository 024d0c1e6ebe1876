"""core.api.serializers: ReusedFields (fields copied once per class and thread),
SparseValidation (absent optional fields not visited) and PlainRepresentation (output by a plan
made once per class): results as DRF's own."""

from __future__ import annotations

import copy
import datetime as dt
import enum
import threading
import uuid
import zoneinfo
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone
from rest_framework import serializers

from core.api import serializers as api_serializers
from core.api.serializers import PlainRepresentation, ReusedFields, SparseValidation
from eventbus.api.serializers import (
    DeliverySerializer,
    EmitSerializer,
    EventDetailSerializer,
    EventFilterSerializer,
    EventSerializer,
)
from eventbus.store.models import Delivery, DeliveryStatus, EventLog, Status


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
        assert validate(EventFilterSerializer, query) == validate(drf_loop(Copying), query)


def drf_loop(cls: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """`cls` with DRF's own validation loop (every writable field, every call)."""
    return type(
        f"DrfLoop{cls.__name__}",
        (cls,),
        {
            "to_internal_value": serializers.Serializer.to_internal_value,
            "_writable_fields": serializers.Serializer._writable_fields,
        },
    )


class Visits(serializers.Serializer):
    name = serializers.CharField(max_length=5)
    count = serializers.IntegerField(required=False, default=3)
    note = serializers.CharField(required=False)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    kind = serializers.CharField(required=False, allow_null=True)
    stamp = serializers.CharField(read_only=True, default="x")

    def validate_note(self, value: str) -> str:
        if value == "bad":
            raise serializers.ValidationError("No.")
        return value.upper()


class SparseVisits(SparseValidation, Visits):
    pass


VISIT_CASES: list[Any] = [
    {"name": "ok"},
    {"name": "ok", "note": "hi", "tags": ["a"]},
    {"note": "bad", "count": "x", "kind": None},
    {"name": "far too long", "tags": "not a list"},
    {},
    ["not", "a", "mapping"],
]


@pytest.mark.parametrize("data", VISIT_CASES)
def test_sparse_validation_answers_as_drf(data: Any) -> None:
    for _ in range(2):
        assert validate(SparseVisits, data) == validate(Visits, data)
    for partial in (False, True):
        sparse, drf = SparseVisits(data=data, partial=partial), Visits(data=data, partial=partial)
        assert sparse.is_valid() == drf.is_valid()
        assert (sparse.validated_data, sparse.errors) == (drf.validated_data, drf.errors)


def test_absent_optional_fields_are_not_visited(monkeypatch: pytest.MonkeyPatch) -> None:
    visited: list[str] = []
    original = serializers.Field.run_validation

    def run_validation(field: serializers.Field, data: Any = serializers.empty) -> Any:
        visited.append(field.field_name)
        return original(field, data)

    monkeypatch.setattr(serializers.Field, "run_validation", run_validation)
    monkeypatch.setattr(serializers.CharField, "run_validation", run_validation)
    assert validate(SparseVisits, {"name": "ok", "tags": ["a"]}) == (
        True,
        {"name": "ok", "count": 3, "tags": ["a"]},
    )
    # name and tags (sent), count (its default applies); never note or kind. The child of
    # tags is validated too; read-only stamp is never visited.
    assert [name for name in visited if name != ""] == ["name", "count", "tags"]
    visited.clear()
    validate(Visits, {"name": "ok", "tags": ["a"]})
    assert {"note", "kind"} <= set(visited)  # DRF visits them all
    assert issubclass(EventFilterSerializer, SparseValidation)
    assert issubclass(EmitSerializer, SparseValidation)


# -- PlainRepresentation ----------------------------------------------------------------------

SAO_PAULO = zoneinfo.ZoneInfo("America/Sao_Paulo")
AT = dt.datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=dt.UTC)


class Colour(enum.Enum):
    RED = "r"


class Kinds(serializers.Serializer):
    """Every field kind the plan converts itself."""

    text = serializers.CharField()
    number = serializers.IntegerField(allow_null=True)
    ident = serializers.UUIDField()
    short_ident = serializers.UUIDField(format="hex")
    flag = serializers.BooleanField()
    ratio = serializers.FloatField()
    status = serializers.ChoiceField(choices=Status.choices, allow_null=True)
    colour = serializers.ChoiceField(choices=[("r", "Red")], required=False)
    when = serializers.DateTimeField(allow_null=True)
    stamped = serializers.DateTimeField(format="%Y-%m-%d")
    fixed = serializers.DateTimeField(default_timezone=SAO_PAULO)
    data = serializers.DictField()
    names = serializers.ListField(child=serializers.CharField())
    renamed = serializers.CharField(source="text")


class PlainKinds(PlainRepresentation, Kinds):
    pass


class WithMethod(PlainRepresentation, serializers.Serializer):
    text = serializers.CharField()
    shout = serializers.SerializerMethodField()

    def get_shout(self, obj: Any) -> str:
        return str(obj.text).upper()


class Dotted(PlainRepresentation, serializers.Serializer):
    inner = serializers.CharField(source="inner.text")


class Thing:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


def thing(**changes: Any) -> Thing:
    values: dict[str, Any] = {
        "text": "olá",
        "number": 7,
        "ident": uuid.UUID("3f2c681b-8281-48ec-9c16-bbe021c83df3"),
        "short_ident": uuid.UUID("3f2c681b-8281-48ec-9c16-bbe021c83df3"),
        "flag": True,
        "ratio": 0.5,
        "status": "dead",
        "colour": "r",
        "when": AT,
        "stamped": AT,
        "fixed": AT,
        "data": {"a": [1, {"b": None}], "c": None},
        "names": ["x", None, "y"],
    }
    return Thing(**{**values, **changes})


THINGS: list[Callable[[], Any]] = [
    thing,
    lambda: thing(number=None, status=None, when=None),  # None stays None
    lambda: thing(when=AT.astimezone(SAO_PAULO)),  # aware, not UTC
    lambda: thing(when=dt.datetime(2026, 3, 1, 9, 0)),  # naive: DRF makes it aware
    lambda: thing(when="2026-01-01T00:00:00Z"),  # a string passes through
    lambda: thing(when=""),  # DRF: None
    lambda: thing(status=Status.DONE, colour=Colour.RED),  # TextChoices and Enum members
    lambda: thing(status="", number=True, text=12),  # odd values, as DRF renders them
    lambda: thing(text=lambda: "called"),  # a callable attribute: DRF calls it
    lambda: {**thing().__dict__, "text": "a mapping"},  # a mapping instance
    lambda: Thing(text="no other attributes"),  # DRF raises
]


def render(cls: type[serializers.Serializer], instance: Any, *, many: bool = False) -> Any:
    try:
        return cls(instance, many=many).data
    except AttributeError as exc:
        return ("AttributeError", str(exc).replace(cls.__name__, "X"))


@pytest.mark.parametrize("zone", ["UTC", "America/Sao_Paulo"])
@pytest.mark.parametrize("make", THINGS)
def test_each_field_kind_renders_as_drf_renders_it(make: Callable[[], Any], zone: str) -> None:
    with timezone.override(zone):
        for _ in range(2):  # the second call uses the plan made by the first
            assert render(PlainKinds, make()) == render(Kinds, make())


class Times(serializers.Serializer):
    when = serializers.DateTimeField(allow_null=True)
    ident = serializers.UUIDField()


class PlainTimes(PlainRepresentation, Times):
    pass


def test_a_list_renders_as_drf_renders_it_and_looks_the_time_zone_up_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    instances = [thing(), thing(when=None), thing(when=AT.astimezone(SAO_PAULO)), thing()]
    lookups = []
    original = timezone.get_current_timezone

    def counted() -> Any:
        lookups.append(1)
        return original()

    monkeypatch.setattr(timezone, "get_current_timezone", counted)
    with timezone.override("America/Sao_Paulo"):
        expected = render(Times, instances, many=True)
        drf_lookups, lookups[:] = len(lookups), []
        assert render(PlainTimes, instances, many=True) == expected
    assert drf_lookups == 3  # DRF: once per datetime value
    assert len(lookups) == 1


def test_fields_the_plan_does_not_know_leave_the_class_to_drf() -> None:
    assert WithMethod(Thing(text="hi")).data == {"text": "hi", "shout": "HI"}
    assert Dotted(Thing(inner=Thing(text="deep"))).data == {"inner": "deep"}
    assert api_serializers._plans[WithMethod] is None
    assert api_serializers._plans[Dotted] is None
    PlainKinds(thing()).data
    assert api_serializers._plans[PlainKinds] is not None


def drf_twin(cls: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """A plain DRF serializer with `cls`'s fields."""
    fields = {name: copy.deepcopy(field) for name, field in cls._declared_fields.items()}
    return type(f"Drf{cls.__name__}", (serializers.Serializer,), fields)


def test_events_and_deliveries_render_as_drf_renders_them() -> None:
    DrfEvent, DrfDelivery = drf_twin(EventSerializer), drf_twin(DeliverySerializer)
    assert issubclass(EventSerializer, PlainRepresentation)
    assert issubclass(DeliverySerializer, PlainRepresentation)
    events = [
        EventLog(
            id=uuid.uuid4(),
            organization_id=uuid.uuid4(),
            event_type="lead.created",
            entity_kind="lead",
            entity_id=entity_id,
            payload={"name": "Ana", "tags": ["a"], "nested": {"k": 1}},
            metadata={"request_id": "r1", "schema_version": 1},
            consumed_by=consumed,
            attempts=attempts,
            last_error=error,
            status=status,
            fanout=2,
            ordering_key=key,
            priority=priority,
            created_at=AT,
            updated_at=AT + dt.timedelta(seconds=1),
        )
        for entity_id, consumed, attempts, error, status, key, priority in [
            (uuid.uuid4(), [], 0, None, Status.PENDING, None, 0),
            (None, ["crm", "webhook:1"], 3, "boom", Status.DEAD, "conv-1", -10),
            (uuid.uuid4(), ["crm"], 1, "", "done", "k", 10),
        ]
    ]
    deliveries = [
        Delivery(
            consumer="crm",
            status=status,
            attempts=2,
            max_attempts=5,
            next_attempt_at=AT,
            last_error=error,
            error_class=None,
            finished_at=finished,
            updated_at=AT,
            redelivered=redelivered,
            redelivery_reason=None,
        )
        for status, error, finished, redelivered in [
            (DeliveryStatus.DEAD, "boom", AT, True),
            ("pending", None, None, False),
        ]
    ]
    with timezone.override("America/Sao_Paulo"):
        assert EventSerializer(events, many=True).data == DrfEvent(events, many=True).data
        assert EventSerializer(events[1]).data == DrfEvent(events[1]).data
        assert (
            DeliverySerializer(deliveries, many=True).data
            == DrfDelivery(deliveries, many=True).data
        )
