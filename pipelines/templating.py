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
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jinja2.sandbox import SandboxedEnvironment

# Jinja2 is imported by the first template or expression compiled, not with this module: the
# admin and the consumers import it in every process, drain workers included.
MAX_TEMPLATE_CHARS = 10_000


class TemplateFailure(ValueError):
    """A template or expression that does not compile or does not render."""


@lru_cache(maxsize=1)
def _env() -> SandboxedEnvironment:
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)


@lru_cache(maxsize=512)
def _template(source: str) -> Any:
    return _env().from_string(source)


@lru_cache(maxsize=512)
def _expression(source: str) -> Any:
    return _env().compile_expression(source, undefined_to_none=False)


def check_template(source: str) -> None:
    """Raise TemplateFailure if `source` does not compile."""
    from jinja2 import TemplateError

    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateFailure(f"a template may be at most {MAX_TEMPLATE_CHARS} characters")
    try:
        _template(source)
    except TemplateError as exc:
        raise TemplateFailure(f"template {source[:80]!r} does not compile: {exc}") from None


def check_expression(source: str) -> None:
    from jinja2 import TemplateError

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
    from jinja2 import TemplateError

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
    from jinja2 import TemplateError

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
