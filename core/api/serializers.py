"""Serializer bases shared by the API apps."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist
from django.db.models.manager import BaseManager
from django.utils import timezone
from django.utils.functional import cached_property
from rest_framework import ISO_8601, fields
from rest_framework.fields import Field, empty
from rest_framework.serializers import BaseSerializer, ListSerializer, Serializer
from rest_framework.settings import api_settings as drf_settings
from rest_framework.utils.serializer_helpers import BindingDict

_built = threading.local()


class ReusedFields:
    """A serializer mixin: the fields are copied once per class and thread, not per instance.

    DRF deep-copies every declared field for each serializer it instantiates; for the event
    endpoints that was a sixth of an API emit's time (py-spy, docs/benchmarks.md, issue 23). A
    serializer with this mixin takes the copy its thread made first and binds it to the new instance
    (a few attribute sets per field). Only for flat serializers whose fields keep no state between
    calls and read neither the context nor `partial`: a thread serves one request at a time, and the
    instance bound last is the one in use. A subclass that declares a nested serializer copies its
    fields per instance again.
    """

    reuses_fields = True  # False for a subclass with nested serializers (__init_subclass__)

    @cached_property
    def fields(self) -> BindingDict:
        if not self.reuses_fields:
            return Serializer.fields.func(self)
        built: dict[type, BindingDict] = _built.__dict__.setdefault("fields", {})
        fields = built.get(type(self))
        if fields is None:  # DRF's own copy and binding, once
            fields = built[type(self)] = Serializer.fields.func(self)
        else:  # bound already (names, sources): only the parent changes
            fields.serializer = self
            for field in fields.values():
                field.parent = self
        return fields

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = getattr(cls, "_declared_fields", {}).values()
        # A nested serializer keeps state of its own: such a class copies per instance, as DRF.
        if any(isinstance(field, BaseSerializer) for field in declared):
            cls.reuses_fields = False


class SparseValidation:
    """A serializer mixin: optional fields absent from a JSON object or a query are not visited.

    DRF runs every writable field on each call, and an absent optional field without a default
    only ends in SkipField; a list's query has nine filters and usually sends one or two. This
    leaves those fields out of the loop (same result: the field would have been skipped), and
    visits every other field as DRF does: present, required, or with a default. Only for plain
    dicts (`request.data` of a JSON body, `query_params.dict()`): form data goes through DRF.
    """

    _present: dict[str, Any] | None = None

    def to_internal_value(self, data: Any) -> Any:
        self._present = data if type(data) is dict else None
        try:
            return super().to_internal_value(data)  # type: ignore[misc]
        finally:
            self._present = None

    @property
    def _writable_fields(self) -> Iterator[Field]:
        present = self._present
        fields = self.fields.values()  # type: ignore[attr-defined]
        skippable = _skippable.get(type(self))
        if skippable is None:
            skippable = _skippable[type(self)] = frozenset(
                field.field_name
                for field in fields
                if not field.required and field.default is empty and not field.read_only
            )
        for field in fields:
            if field.read_only:
                continue
            name = field.field_name
            if present is not None and name in skippable and name not in present:
                continue
            yield field


_skippable: dict[type, frozenset[str]] = {}


class PlainList(ListSerializer):
    """The list of a PlainRepresentation serializer."""

    def to_representation(self, data: Any) -> list[Any]:
        items = data.all() if isinstance(data, BaseManager) else data
        tz = _current_timezone()
        represent = self.child.represent
        return [represent(item, tz) for item in items]


def _current_timezone() -> dt.tzinfo | None:
    """The time zone DRF's DateTimeField renders in."""
    return timezone.get_current_timezone() if settings.USE_TZ else None


Convert = Callable[[Any, dt.tzinfo | None], Any]


class PlainRepresentation:
    """A serializer mixin: `to_representation` by a plan made once per class, same output.

    DRF renders each field through `get_attribute` (a loop over the source path, with its exception
    handling) and the field's own `to_representation`, whose DateTimeField looks up the current time
    zone for every value: ten events took half a millisecond, more than the rest of
    `GET /api/v1/events` in Python (docs/benchmarks.md, issue 23). The plan reads each column as an
    attribute and converts it as DRF's field would (`str` for a CharField or a UUID, the ISO text of
    an aware datetime in the current time zone, ...), with the time zone looked up once per
    instance, or once per list (`many=True`: its Meta names PlainList; a subclass that declares a
    Meta of its own should keep that `list_serializer_class`).

    Only for serializers whose readable fields are all of the kinds below, each reading one
    attribute of its own name or `source`; any other field (a nested serializer, a method
    field, a related field, a dotted source) leaves the class to DRF. An instance that is a
    mapping, an attribute that is missing or callable, a naive datetime: DRF renders that
    instance, so the output never differs (tests/core/test_api_serializers.py compares them).
    """

    def to_representation(self, instance: Any) -> Any:
        return self.represent(instance, _current_timezone())

    def represent(self, instance: Any, tz: dt.tzinfo | None) -> Any:
        """`instance` as data, its datetimes in `tz` (the current time zone)."""
        plan = _plans.get(type(self), _UNPLANNED)
        if plan is _UNPLANNED:
            plan = _plans[type(self)] = _plan(self)
        if plan is None or isinstance(instance, Mapping):
            return super().to_representation(instance)  # type: ignore[misc]
        out: dict[str, Any] = {}
        try:
            for name, attribute, convert in plan:
                value = getattr(instance, attribute)
                if value is None:
                    out[name] = None
                elif callable(value):
                    raise _Unplanned
                else:
                    out[name] = convert(value, tz)
        except (_Unplanned, AttributeError, ObjectDoesNotExist):
            return super().to_representation(instance)  # type: ignore[misc]
        return out

    class Meta:
        # `many=True`: the time zone is looked up once per list (4-5 us a lookup here).
        list_serializer_class = PlainList


class _Unplanned(Exception):
    """A value the plan does not convert as DRF would: DRF renders the instance."""


_UNPLANNED = object()
_plans: dict[type, Any] = {}  # serializer class -> [(name, attribute, convert)] or None


def _plan(serializer: Serializer) -> list[tuple[str, str, Convert]] | None:
    plan: list[tuple[str, str, Convert]] = []
    for field in serializer._readable_fields:
        convert = _converter(field)
        if convert is None or len(field.source_attrs) != 1:
            return None
        plan.append((field.field_name, field.source_attrs[0], convert))
    return plan


def _converter(field: Field) -> Convert | None:
    """How DRF's `field.to_representation` turns a non-None value into data, or None when the
    field is not one the plan knows (its class overrides `to_representation`)."""
    make = _CONVERTERS.get(type(field).to_representation)
    return make(field) if make is not None else None


def _text(value: Any, tz: dt.tzinfo | None) -> str:
    return str(value)


def _integer(value: Any, tz: dt.tzinfo | None) -> int:
    return int(value)


def _json_object(value: Any, tz: dt.tzinfo | None) -> dict[str, Any]:
    return {str(key): item for key, item in value.items()}


def _text_list(value: Any, tz: dt.tzinfo | None) -> list[str | None]:
    return [None if item is None else str(item) for item in value]


def _bound(field: Field) -> Convert:
    method = field.to_representation
    return lambda value, tz: method(value)


def _choice(field: Field) -> Convert:
    choices, fallback = field.choice_strings_to_values, field.to_representation

    def convert(value: Any, tz: dt.tzinfo | None) -> Any:
        if type(value) is not str:
            return fallback(value)  # an Enum member, a number: as DRF does it
        return value if value == "" else choices.get(value, value)

    return convert


def _datetime(field: Field) -> Convert:
    output_format = getattr(field, "format", drf_settings.DATETIME_FORMAT)
    if output_format is None or output_format.lower() != ISO_8601 or hasattr(field, "timezone"):
        return _bound(field)  # its own format or time zone: DRF's method
    fallback = field.to_representation

    def convert(value: Any, tz: dt.tzinfo | None) -> Any:
        if tz is None or not isinstance(value, dt.datetime) or value.utcoffset() is None:
            return fallback(value)  # naive, a string, or USE_TZ off: as DRF does it
        text = value.astimezone(tz).isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return convert


def _uuid(field: Field) -> Convert:
    return _text if field.uuid_format == "hex_verbose" else _bound(field)


def _object(field: Field) -> Convert | None:
    child = type(field.child).to_representation
    return _json_object if child is fields._UnvalidatedField.to_representation else None


def _list(field: Field) -> Convert | None:
    child = type(field.child).to_representation
    return _text_list if child is fields.CharField.to_representation else None


# A field class's to_representation -> the converter of such a field.
_CONVERTERS: dict[Callable[..., Any], Callable[[Field], Convert | None]] = {
    fields.CharField.to_representation: lambda field: _text,
    fields.IntegerField.to_representation: lambda field: _integer,
    fields.UUIDField.to_representation: _uuid,
    fields.BooleanField.to_representation: _bound,
    fields.FloatField.to_representation: _bound,
    fields.ChoiceField.to_representation: _choice,
    fields.DateTimeField.to_representation: _datetime,
    fields.DictField.to_representation: _object,
    fields.ListField.to_representation: _list,
}


class StrictBooleanField(fields.BooleanField):
    """JSON true/false only: DRF's BooleanField would take 0, 1, "yes" or "off"."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictIntegerField(fields.IntegerField):
    """JSON integers only: DRF's IntegerField would take "12" or 12.0."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return int(super().to_internal_value(data))
