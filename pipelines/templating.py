"""Templates and conditions over a pipeline's context: a bounded Jinja2 sandbox, strict undefined.

`render(value, context)` renders every string inside a JSON value (`"{{orderNumber}}"`,
`"{{order.totalAmount}}"`); a name the context lacks is a `TemplateFailure` naming it, never an
empty string. `evaluate(expression, context)` runs a `condition` node's expression with Jinja2's
sandboxed `compile_expression`: attribute and item access, comparisons, `and`/`or`/`not`, `in`,
literals and filters; no Python `eval`, no underscored attributes, no calls into unsafe objects.

Every evaluation is bounded (`pipelines.sandbox`: CPU time, characters produced, loop
iterations, integer width; the `PIPELINES_TEMPLATE_*` settings). `check_templates` and
`check_expression` compile and then dry-run the source without a context (an undefined name is
empty there), under the same limits, so a definition that cannot finish is refused when saved;
what depends on the context is stopped at run time, where the step fails with the limit's text.
Any error a template raises, compiling or running, is a `TemplateFailure`, never another
exception. Compiled sources are cached in a bounded LRU (entries and characters).
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from pipelines.conf import pipeline_settings

if TYPE_CHECKING:
    from pipelines.sandbox import BoundedEnvironment, Budget

# Jinja2 is imported by the first template or expression compiled, not with this module: the
# admin and the consumers import it in every process, drain workers included.
MAX_TEMPLATE_CHARS = 10_000
# What compiling or running a template may raise besides Jinja's TemplateError: a deeply nested
# template (RecursionError), a literal Python refuses (ValueError: an int of 5000 digits),
# arithmetic (ZeroDivisionError, OverflowError), a wrong type, memory.
EVALUATION_ERRORS = (
    TypeError,
    ValueError,
    ArithmeticError,
    LookupError,
    AttributeError,
    RecursionError,
    MemoryError,
    SyntaxError,
)


class TemplateFailure(ValueError):
    """A template or expression that does not compile, does not render, or goes over a limit."""


class _Cache:
    """An LRU of compiled sources bounded by entries and by their sources' total characters."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, kind: str, source: str, build: Callable[[], Any]) -> Any:
        key = (kind, source)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()
        max_entries = pipeline_settings.TEMPLATE_CACHE_ENTRIES
        max_chars = pipeline_settings.TEMPLATE_CACHE_CHARS
        with self._lock:
            if key not in self._items and len(source) <= max_chars:
                self._items[key] = value
                self._chars += len(source)
            while self._items and (len(self._items) > max_entries or self._chars > max_chars):
                (_, old), _ = self._items.popitem(last=False)
                self._chars -= len(old)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def chars(self) -> int:
        return self._chars


CACHE = _Cache()
_ENV: list[BoundedEnvironment] = []


def _env() -> BoundedEnvironment:
    if not _ENV:
        from pipelines.sandbox import BoundedEnvironment

        _ENV.append(BoundedEnvironment())
    return _ENV[0]


def _template(source: str) -> Any:
    return CACHE.get("template", source, lambda: _env().from_string(source))


def _expression(source: str) -> Any:
    return CACHE.get(
        "expression", source, lambda: _env().compile_expression(source, undefined_to_none=False)
    )


@contextmanager
def budget_scope(*, probe: bool = False) -> Iterator[Budget]:
    """One budget (from the settings) shared by every evaluation inside the block: a
    definition's validation, a pipeline run. Only the evaluations' own CPU time counts, not what
    runs between them (compiling, HTTP calls, queries). Nested scopes use the outer one."""
    from pipelines.sandbox import CURRENT, Budget

    outer = CURRENT.get()
    if outer is not None:
        yield outer
        return
    budget = Budget(
        time_budget_ms=pipeline_settings.TEMPLATE_TIME_BUDGET_MS,
        max_output=pipeline_settings.TEMPLATE_MAX_OUTPUT,
        max_iterations=pipeline_settings.TEMPLATE_MAX_ITERATIONS,
        max_int_bits=pipeline_settings.TEMPLATE_MAX_INT_BITS,
        probe=probe,
    )
    token = CURRENT.set(budget)
    try:
        yield budget
    finally:
        CURRENT.reset(token)


@contextmanager
def _evaluation(*, probe: bool = False) -> Iterator[Budget]:
    """The CPU time of the block counted against the current budget (a new one if none)."""
    with budget_scope(probe=probe) as budget:
        entered = budget.enter()
        try:
            yield budget
        finally:
            if entered:
                budget.leave()


def _failure(what: str, source: str, exc: BaseException) -> TemplateFailure:
    from jinja2 import TemplateError, TemplateSyntaxError

    from pipelines.sandbox import LimitExceeded

    head = f"{what} {source[:80]!r}"
    if isinstance(exc, LimitExceeded):
        return TemplateFailure(f"{head} goes over a limit: {exc}")
    if isinstance(exc, RecursionError):
        return TemplateFailure(f"{head} is nested too deeply")
    if isinstance(exc, MemoryError):
        return TemplateFailure(f"{head} needs too much memory")
    if isinstance(exc, TemplateSyntaxError | SyntaxError):
        return TemplateFailure(f"{head} does not compile: {exc}")
    if isinstance(exc, TemplateError):
        return TemplateFailure(f"{head}: {exc}")
    return TemplateFailure(f"{head}: {type(exc).__name__}: {exc}")


def _compile(what: str, source: str, build: Callable[[str], Any]) -> Any:
    from jinja2 import TemplateError

    from pipelines.sandbox import LimitExceeded

    if len(source) > MAX_TEMPLATE_CHARS:
        raise TemplateFailure(f"{what} of more than {MAX_TEMPLATE_CHARS} characters")
    try:
        return build(source)
    except (TemplateError, LimitExceeded, *EVALUATION_ERRORS) as exc:
        raise _failure(what, source, exc) from None


def _probe(what: str, source: str, run: Callable[[], Any]) -> None:
    """Dry-run `source` without a context: only a limit or deep nesting is its fault here (an
    undefined name, a type the context would change, is for run time). Each template has its
    own counts of iterations and characters; the CPU time is the whole validation's, and once it
    is spent the definition's later templates are not dry-run (the definition is refused)."""
    from pipelines.sandbox import CURRENT, LimitExceeded

    with budget_scope(probe=True) as shared:
        if shared.spent:
            return
        own = dataclasses.replace(shared, iterations=0, produced=0)
        token = CURRENT.set(own)
        try:
            with _evaluation(probe=True):
                run()
        except (LimitExceeded, RecursionError, MemoryError) as exc:
            raise _failure(what, source, exc) from None
        except Exception:  # noqa: S110  (any other error depends on the context)
            pass
        finally:
            CURRENT.reset(token)
            shared.cpu_used = own.cpu_used
            shared.spent = own.cpu_used * 1000 > own.time_budget_ms


def check_template(source: str) -> None:
    """Raise TemplateFailure if `source` does not compile or cannot finish within the limits."""
    template = _compile("template", source, _template)
    _probe("template", source, lambda: _render_text(template))


def check_expression(source: str) -> None:
    if not source.strip():
        raise TemplateFailure("the expression is empty")
    expression = _compile("expression", source, _expression)
    _probe("expression", source, expression)


def check_templates(value: Any) -> None:
    """Compile and dry-run every string inside a JSON value."""
    for text in _strings(value):
        check_template(text)


def _render_text(template: Any, context: Mapping[str, Any] | None = None) -> str:
    """The template's output, refused as soon as it passes the output limit."""
    from pipelines.sandbox import current

    budget = current()
    parts: list[str] = []
    size = 0
    for part in template.generate(context or {}):
        size += len(part)
        if size > budget.max_output:
            from pipelines.sandbox import LimitExceeded

            raise LimitExceeded(f"the output passed {budget.max_output} characters")
        parts.append(part)
    return "".join(parts)


def render(value: Any, context: Mapping[str, Any]) -> Any:
    """Render every string of a JSON value (keys included) against `context`."""
    if isinstance(value, str):
        if "{" not in value:
            return value
        template = _compile("template", value, _template)
        return _run("template", value, lambda: _render_text(template, context))
    if isinstance(value, Mapping):
        return {render(k, context): render(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, context) for v in value]
    return value


def evaluate(source: str, context: Mapping[str, Any]) -> bool:
    expression = _compile("expression", source, _expression)
    return bool(_run("expression", source, lambda: bool(expression(**context))))


def _run(what: str, source: str, work: Callable[[], Any]) -> Any:
    from jinja2 import TemplateError

    from pipelines.sandbox import LimitExceeded

    try:
        with _evaluation():
            return work()
    except (TemplateError, LimitExceeded, *EVALUATION_ERRORS) as exc:
        raise _failure(what, source, exc) from None


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []
