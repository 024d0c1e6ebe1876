"""Typed app settings: each app declares its knobs once, with their type and default, in a
subclass of `AppSettings`; every read looks at the app's settings dict (e.g. `settings.EVENTBUS`)
at call time, so tests can override it, and coerces the value to the declared type."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, get_args, get_origin, get_type_hints

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

Coerce = Callable[[object], Any]
K = TypeVar("K")
V = TypeVar("V")

# What a string spells for a bool knob (a value read from the environment by hand, say).
BOOL_WORDS = {
    **dict.fromkeys(("true", "yes", "on", "1"), True),
    **dict.fromkeys(("false", "no", "off", "0"), False),
}


class AppSettings:
    """An app's conf object: its annotated UPPER_CASE class attributes are the knobs.

    `class BusSettings(AppSettings, namespace="EVENTBUS"): MAX_ATTEMPTS: int = 8` makes
    `bus_settings.MAX_ATTEMPTS` read `settings.EVENTBUS["MAX_ATTEMPTS"]` as an int, else 8.
    """

    namespace: ClassVar[str]

    def __init_subclass__(cls, *, namespace: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.namespace = namespace
        for name, hint in get_type_hints(cls).items():
            if name.isupper():
                setattr(cls, name, Knob(name, hint, getattr(cls, name)))

    def source(self) -> object:
        """What the knobs read now: `settings.<namespace>` (None when unset). A value worked out
        from the knobs stays current while this is the same object; overriding the settings
        (override_settings, a test's `settings` fixture) replaces it."""
        return getattr(settings, self.namespace, None)

    def derived(self, cache: dict[K, tuple[object, V]], key: K, build: Callable[[], V]) -> V:
        """`cache[key]` while it was built from the current `source()`, else `build()` kept
        there: what a hot path works out from the knobs, once per settings."""
        source = self.source()
        hit = cache.get(key)
        if hit is not None and hit[0] is source:
            return hit[1]
        value = build()
        cache[key] = (source, value)
        return value

    if not TYPE_CHECKING:  # hidden from mypy, which then reports an unknown name as an error

        def __getattr__(self, name: str) -> Any:
            raise AttributeError(f"unknown {self.namespace} setting {name!r}")


class Knob:
    """One declared setting: `settings.<namespace>[name]` coerced to its type, or the default."""

    def __init__(self, name: str, hint: object, default: object) -> None:
        self.name = name
        self.type_name = hint.__name__ if isinstance(hint, type) else str(hint)
        self.coerce = coercer(hint)
        self.default = self.coerce(default)

    def __get__(self, instance: AppSettings | None, owner: type[AppSettings]) -> Any:
        configured = getattr(settings, owner.namespace, {})
        if self.name not in configured:
            return self.default
        return self.coerced(owner.namespace, configured[self.name])

    def coerced(self, namespace: str, value: object) -> Any:
        try:
            return self.coerce(value)
        except (TypeError, ValueError) as error:
            raise ImproperlyConfigured(
                f"{namespace}[{self.name!r}] must be {self.type_name}, not {value!r}"
            ) from error


def coercer(hint: object) -> Coerce:
    """The function that turns a configured value into `hint` (or raises TypeError/ValueError)."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return tuple_of(coercer(args[0]))
    if origin is Mapping and args[0] is str:
        return mapping_of(coercer(args[1]))
    if hint in SCALARS:
        return SCALARS[hint]
    raise TypeError(f"AppSettings knobs cannot be {hint!r}")


def tuple_of(item: Coerce) -> Coerce:
    def coerce(value: object) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise TypeError("not a list")
        return tuple(item(element) for element in value)

    return coerce


def mapping_of(item: Coerce) -> Coerce:
    def coerce(value: object) -> dict[str, Any]:
        if not isinstance(value, Mapping) or not all(isinstance(key, str) for key in value):
            raise TypeError("not a mapping of strings")
        return {key: item(element) for key, element in value.items()}

    return coerce


def to_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError("not an integer")
    return int(value)


def to_float(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise TypeError("not a number")
    return float(value)


def to_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and (word := value.strip().lower()) in BOOL_WORDS:
        return BOOL_WORDS[word]
    raise ValueError("not a boolean")


def to_str(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


SCALARS: dict[object, Coerce] = {int: to_int, float: to_float, bool: to_bool, str: to_str}
