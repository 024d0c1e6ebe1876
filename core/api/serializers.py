"""Serializer bases shared by the API apps."""

from __future__ import annotations

import threading
from typing import Any

from django.utils.functional import cached_property
from rest_framework.serializers import BaseSerializer, Serializer
from rest_framework.utils.serializer_helpers import BindingDict

_built = threading.local()


class ReusedFields:
    """A serializer mixin: the fields are copied once per class and thread, not per instance.

    DRF deep-copies every declared field for each serializer it instantiates; for the event
    endpoints that was a sixth of an API emit's time (py-spy, README "Issue #23"). A serializer
    with this mixin takes the copy its thread made first and binds it to the new instance (a
    few attribute sets per field). Only for flat serializers whose fields keep no state between
    calls and read neither the context nor `partial`: a thread serves one request at a time, and
    the instance bound last is the one in use. A subclass that declares a nested serializer
    copies its fields per instance again.
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
