"""Templates and conditions over a pipeline's context: Jinja2's sandbox, strict undefined.

`render(value, context)` renders every string inside a JSON value (`"{{orderNumber}}"`,
`"{{order.totalAmount}}"`); a name the context lacks is a `TemplateFailure` naming it, never an
empty string. `evaluate(expression, context)` runs a `condition` node's expression with Jinja2's
sandboxed `compile_expression`: attribute and item access, comparisons, `and`/`or`/`not`, `in`,
literals and filters; no Python `eval`, no underscored attributes, no calls into unsafe objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
MAX_TEMPLATE_CHARS = 10_000


class TemplateFailure(ValueError):
    """A template or expression that does not compile or does not render."""


@lru_cache(maxsize=512)
def _template(source: str) -> Any:
    return _ENV.from_string(source)


@lru_cache(maxsize=512)
def _expression(source: str) -> Any:
    return _ENV.compile_expression(source, undefined_to_none=False)


def check_template(source: str) -> None:
    """Raise TemplateFailure if `source` does not compile."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateFailure(f"a template may be at most {MAX_TEMPLATE_CHARS} characters")
    try:
        _template(source)
    except TemplateError as exc:
        raise TemplateFailure(f"template {source[:80]!r} does not compile: {exc}") from None


def check_expression(source: str) -> None:
    if not source.strip():
        raise TemplateFailure("the expression is empty")
    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateFailure(f"an expression may be at most {MAX_TEMPLATE_CHARS} characters")
    try:
        _expression(source)
    except TemplateError as exc:
        raise TemplateFailure(f"expression {source[:80]!r} does not compile: {exc}") from None


def check_templates(value: Any) -> None:
    """Compile every string inside a JSON value."""
    for text in _strings(value):
        check_template(text)


def render(value: Any, context: Mapping[str, Any]) -> Any:
    """Render every string of a JSON value (keys included) against `context`."""
    if isinstance(value, str):
        if "{" not in value:
            return value
        try:
            return _template(value).render(context)
        except TemplateError as exc:
            raise TemplateFailure(f"template {value[:80]!r}: {exc}") from None
    if isinstance(value, Mapping):
        return {render(k, context): render(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, context) for v in value]
    return value


def evaluate(source: str, context: Mapping[str, Any]) -> bool:
    try:
        return bool(_expression(source)(**context))
    except TemplateError as exc:
        raise TemplateFailure(f"expression {source[:80]!r}: {exc}") from None
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise TemplateFailure(f"expression {source[:80]!r}: {exc}") from None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
