"""What PostgreSQL can store: emit's JSON text for jsonb columns and its strings for text columns.

Everything here refuses with an `EventValidationError` naming the field, before any statement
runs, what the server would otherwise refuse mid-statement (NUL characters, unpaired surrogates)
or what no consumer should have to carry (oversized or absurdly nested JSON). The checks read the
text the encoder already produced (C-speed string methods) instead of walking the objects again:
emit is the hot path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eventbus.store.errors import EventValidationError

_JSON = json.JSONEncoder(allow_nan=False, ensure_ascii=False, separators=(",", ":"))
_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# For the depth count: containers become "(" / ")", quotes stay, every other byte goes (UTF-8
# continuation bytes are >= 0x80, so no multi-byte character can pass for a bracket).
_TO_PARENS = bytes.maketrans(b"{[}]", b"(())")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'{[}]"')
NUL_MESSAGE = "{field} contains a NUL character, which PostgreSQL cannot store"
SURROGATE_MESSAGE = "{field} contains an unpaired UTF-16 surrogate, which is not valid Unicode"


@dataclass(frozen=True)
class JsonLimits:
    """The size (UTF-8 bytes of the JSON text) and nesting depth one JSON field may have."""

    max_bytes: int
    bytes_setting: str  # named in the error, so the caller knows which knob refused it
    max_depth: int


def json_text(field: str, value: Mapping[str, Any], limits: JsonLimits) -> str:
    """Compact JSON text of `value` for a jsonb column; refuses what jsonb cannot store and what
    is over `limits` (a 10,000-level nesting too: the encoder's RecursionError)."""
    try:
        text = _JSON.encode(value)
    except (TypeError, ValueError) as exc:
        raise EventValidationError(
            f"{field} is not JSON-serializable: {exc}", field=field
        ) from None
    except RecursionError:
        raise _too_deep(field, limits) from None
    size = _utf8_size(field, text)
    if "\\u0000" in text and _NUL_ESCAPE.search(text):  # jsonb refuses \u0000 even escaped
        raise EventValidationError(NUL_MESSAGE.format(field=field), field=field)
    if size > limits.max_bytes:
        raise EventValidationError(
            f"{field} is {size} bytes; the limit is {limits.max_bytes} bytes "
            f"({limits.bytes_setting}). Store large content elsewhere and reference it.",
            field=field,
        )
    if nests_deeper_than(text, limits.max_depth):
        raise _too_deep(field, limits)
    return text


def check_text(field: str, value: str) -> str:
    """`value` if a PostgreSQL text column can hold it (no NUL, valid Unicode), else refuse."""
    if "\x00" in value:
        raise EventValidationError(NUL_MESSAGE.format(field=field), field=field)
    if not value.isascii():
        _utf8_size(field, value)
    return value


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether JSON `text` (as this module's encoder writes it) nests containers more than
    `limit` levels deep (`{}` is one level, `{"a": []}` two)."""
    if text.count("{") + text.count("[") <= limit:  # the common case: few containers at all
        return False
    data = text.encode()  # only ASCII is structure; bytes methods are the fastest over it
    if b"\\" in data:  # drop escapes, so every quote left opens or closes a string: `\\` pairs
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")  # first, read left to right
    # Brackets and quotes only. An adjacent pair of quotes holds no bracket (an empty string,
    # or two strings with no structure between): dropping it changes no nesting.
    structure = data.translate(_TO_PARENS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in structure:  # strings holding brackets: keep what is outside them
        structure = b"".join(structure.split(b'"')[::2])
    for _ in range(limit):  # each pass removes the innermost level
        if not structure:
            return False
        structure = structure.replace(b"()", b"")
    return bool(structure)


def _utf8_size(field: str, text: str) -> int:
    if text.isascii():  # the common case: its length is its size, and it holds no surrogate
        return len(text)
    try:
        return len(text.encode())
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"): not encodable as UTF-8
        raise EventValidationError(SURROGATE_MESSAGE.format(field=field), field=field) from None


def _too_deep(field: str, limits: JsonLimits) -> EventValidationError:
    return EventValidationError(
        f"{field} is nested more than {limits.max_depth} levels deep (EVENTBUS_MAX_JSON_DEPTH)",
        field=field,
    )
