"""The registry of API key scopes: what an integration API key may be allowed to do.

Each app declares the scopes its endpoints require (`declare("events:read", "...")`, at import of
a module its AppConfig loads), so keys can only be created with scopes that exist and the admin
lists them. Names are `<resource>:<action>` in lower case; later apps add `webhooks:*`, `lgpd:*`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SCOPE_PATTERN = re.compile(r"[a-z][a-z0-9_]*:[a-z][a-z0-9_]*")

_scopes: dict[str, str] = {}


class UnknownScopeError(ValueError):
    """A scope name that no app declared."""


def declare(name: str, description: str) -> str:
    """Register a scope (idempotent for the same description); returns its name."""
    if not SCOPE_PATTERN.fullmatch(name):
        raise ValueError(f"scope {name!r} must look like 'resource:action' (lower snake case)")
    existing = _scopes.get(name)
    if existing is not None and existing != description:
        raise ValueError(f"scope {name!r} is already declared as {existing!r}")
    _scopes[name] = description
    return name


def declared() -> dict[str, str]:
    """Every declared scope and its description, sorted by name."""
    return dict(sorted(_scopes.items()))


def validate(names: Iterable[str]) -> list[str]:
    """The scopes, de-duplicated and sorted; raises UnknownScopeError naming the unknown ones."""
    wanted = sorted(set(names))
    unknown = [name for name in wanted if name not in _scopes]
    if unknown:
        raise UnknownScopeError(
            f"unknown scope(s): {', '.join(unknown)}; known: {', '.join(declared()) or 'none'}"
        )
    return wanted
