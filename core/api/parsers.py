"""The API's JSON parser: DRF's, plus the inputs that would otherwise end in a 500.

- nesting too deep for Python's parser (RecursionError) is a parse error;
- an unpaired UTF-16 surrogate escape (`"\\ud800"`) parses in Python but cannot be encoded for
  PostgreSQL, so it is refused here (only bodies that contain such an escape are walked).
"""

from __future__ import annotations

import io
import re
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        raw = stream.read() if stream is not None else b""
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
            lone_surrogate = _SURROGATE_ESCAPE.search(raw) and _has_lone_surrogate(data)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        if lone_surrogate:
            raise ParseError("JSON parse error - unpaired UTF-16 surrogate (not valid Unicode)")
        return data


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False
