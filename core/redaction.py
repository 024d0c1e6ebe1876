"""Personal data and secret redaction, shared by the log formatter and Sentry's `before_send`.

Two rules, applied to any nested structure of dicts, lists and strings:
- by key: a value under a sensitive key (authorization, cookie, password, cpf, phone, e-mail,
  tokens...) is replaced whole, whatever it looks like;
- by pattern: inside any other string, CPFs, Brazilian phone numbers, e-mail addresses, bearer
  tokens and `sk_...`/`whsec_...` secrets are replaced where they occur.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

# Lower-cased, with "-" read as "_"; a key matches when one of these is a part of it
# ("X-Api-Key", "refresh_token", "contact_email", "customer_cpf").
_SENSITIVE_KEY_PARTS = (
    "authorization",
    "cookie",
    "api_key",
    "apikey",
    "password",
    "passwd",
    "secret",
    "token",
    "cpf",
    "phone",
    "email",
    "e_mail",
    "signature",
    "dsn",
)

# A number token: not glued to letters, digits, "_" or "-" on either side, and not a host name
# (after "//" or "@", before ":<port>" or ".<label>"): digit-only hosts in URLs and DSNs are not
# phones or CPFs.
_ALONE = r"(?<![\w-])(?<!//)(?<!@){}(?![\w-])(?!:\d)(?!\.[A-Za-z])"

_LOCAL = r"9?\d{4}[\s.-]?\d{4}"
_PHONE = (
    rf"(?:\+?55[\s.-]?\(?\d{{2}}\)?[\s.-]?{_LOCAL}"  # +55 11 9..., 5511912345678
    rf"|\(\d{{2}}\)[\s.-]?{_LOCAL}"  # (11) 91234-5678
    r"|\d{2}[\s.-]9?\d{4}[\s.-]?\d{4}"  # 11 91234-5678, 11-34567890
    r"|\d{2}9?\d{4}[\s.-]\d{4})"  # 1191234-5678
)

_PATTERNS = (
    # Bearer tokens first, so the token is consumed whole.
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]+"), "Bearer " + REDACTED),
    (re.compile(r"\b(?:sk|whsec|dck)_[A-Za-z0-9+/=_-]{6,}"), REDACTED),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[EMAIL]"),
    # Numbers are matched only as whole tokens ({_ALONE}), so digit runs inside UUIDs, hex ids
    # and timestamps are left alone.
    # CPF: 000.000.000-00, or 11 bare digits.
    (re.compile(_ALONE.format(r"\d{3}\.?\d{3}\.?\d{3}-?\d{2}")), "[CPF]"),
    # Brazilian phones: +55 (11) 91234-5678, 55 11 912345678, (11) 1234-5678, 11 3456-7890.
    # Written as a phone: with the country code, the area code in parentheses, or a separator.
    # Ten bare digits are not taken for a landline: shop order ids, timestamps and counters
    # have ten digits too (eleven bare digits are masked as a CPF above).
    (re.compile(_ALONE.format(_PHONE)), "[PHONE]"),
)

_MAX_DEPTH = 8


def is_sensitive_key(key: object) -> bool:
    """True when a value stored under this key must never be logged."""
    name = str(key).lower().replace("-", "_")
    return any(part in name for part in _SENSITIVE_KEY_PARTS)


def redact_text(text: str) -> str:
    """Replace personal data and secrets found anywhere in a string."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact(value: Any, _depth: int = 0) -> Any:
    """A copy of `value` with sensitive keys and patterns redacted (dicts, lists, strings)."""
    if isinstance(value, str):
        return redact_text(value)
    if _depth >= _MAX_DEPTH:
        return value if isinstance(value, int | float | bool | None) else REDACTED
    if isinstance(value, Mapping):
        return {
            k: REDACTED if is_sensitive_key(k) else redact(v, _depth + 1) for k, v in value.items()
        }
    if isinstance(value, list | tuple | set):
        return [redact(v, _depth + 1) for v in value]
    if isinstance(value, int | float | bool | None):
        return value
    # Anything else would reach the output through str() (JSON's default): redact that text.
    return redact_text(str(value))
