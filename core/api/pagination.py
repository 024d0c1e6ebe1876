"""Keyset ("cursor") pagination over (created_at, id), newest first; never a COUNT(*).

A page asks the database for `limit + 1` rows after the cursor position (an index range scan on
`(organization_id, created_at DESC)`); the extra row only says whether there is a next page. The
cursor is the last row's (created_at, id), opaque to clients (URL-safe base64).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from rest_framework import serializers

from core.api.conf import api_settings

T = TypeVar("T")


@dataclass(frozen=True)
class Position:
    """Where a page ends: rows strictly older than this (ties broken by id) come next."""

    created_at: dt.datetime
    id: uuid.UUID


def encode_cursor(position: Position) -> str:
    raw = f"{position.created_at.isoformat()}|{position.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(text: str) -> Position:
    """The position in a cursor from `encode_cursor`; a ValidationError on `cursor` otherwise."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        stamp, _, ident = raw.partition("|")
        position = Position(dt.datetime.fromisoformat(stamp), uuid.UUID(ident))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        position = None
    if position is None or position.created_at.tzinfo is None:
        raise serializers.ValidationError("Invalid cursor: pass a `next_cursor` unchanged.")
    return position


class CursorField(serializers.CharField):
    """A query parameter holding a cursor; validates to a Position."""

    def to_internal_value(self, data: Any) -> Position:
        return decode_cursor(super().to_internal_value(data))


class PageQuery(serializers.Serializer):
    """The query parameters of a cursor-paginated list: `limit` and `cursor`."""

    limit = serializers.IntegerField(required=False, min_value=1, help_text="Default 50, max 200.")
    cursor = CursorField(required=False, help_text="`next_cursor` of the previous page.")

    def validate_limit(self, value: int) -> int:
        if value > api_settings.MAX_PAGE_SIZE:
            raise serializers.ValidationError(f"At most {api_settings.MAX_PAGE_SIZE}.")
        return value


def page(
    request: Any,
    rows: Sequence[T],
    *,
    limit: int,
    position_of: Callable[[T], Position],
    render: Callable[[Sequence[T]], list[Any]],
) -> dict[str, Any]:
    """The page document: `results`, `next_cursor` and `next` (null on the last page)."""
    shown = rows[:limit]
    cursor = encode_cursor(position_of(shown[-1])) if len(rows) > limit else None
    return {"results": render(shown), "next_cursor": cursor, "next": _next_url(request, cursor)}


def _next_url(request: Any, cursor: str | None) -> str | None:
    if cursor is None:
        return None
    query = request.query_params.copy()
    query["cursor"] = cursor
    return f"{request.build_absolute_uri(request.path)}?{query.urlencode()}"
