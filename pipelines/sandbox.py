"""The bounded Jinja2 sandbox every tenant-written template and expression runs in.

Jinja2's `SandboxedEnvironment` stops escapes (no underscored attributes, no unsafe calls) but
not work: `{{ 7**3000000 }}`, `{{ 'a'*10**8 }}` or three nested `range(100000)` loops run for
minutes in the web process. `BoundedEnvironment` bounds the work of one evaluation (a `Budget`):

- **operators**: `**`, `*`, `+`, `%` and `//` go through `call_binop` (Jinja's
  `intercepted_binops`), which refuses an integer result wider than `max_int_bits`, a string or
  list longer than `max_output`, and `%`-formatting with a width or precision over 1000, before
  Python computes them. Intercepted operators are never folded at compile time, and the
  environment is built with `optimized=False`, so nothing unbounded runs while compiling.
- **loops**: the compiler's tree is rewritten before code generation (`_generate`): every
  `{% for %}` iterates through the `bounded_loop` filter, which counts each iteration against
  the budget's `max_iterations` (the total over every loop of the evaluation, nested or not);
  `range()` refuses more than that many items up front.
- **text**: every piece of output (literal text included, in `{% set %}` blocks and macros
  too) goes through `bounded_out`, and `~` through `bounded_concat`; the characters produced
  by an evaluation, together with the strings its operators and filters build, may not exceed
  `max_output`.
- **calls and filters**: every call (`environment.call`) and every filter counts as an
  operation; size arguments (`center`, `indent`, `batch`, `slice`, `replace`, ...) are checked
  before the call and the result's size after it. Filters are called with the context, so
  Jinja cannot fold them at compile time. `str.format` and `lipsum` are not available;
  lists, dicts and sets are immutable (`ImmutableSandboxedEnvironment`); `namespace()`
  attributes are size-checked.
- **time**: each of those hooks compares the CPU time the evaluation has used
  (`time.thread_time`, summed over the budget's evaluations) with `time_budget_ms`.

A budget exceeded raises `LimitExceeded`, which `pipelines.templating` reports as a
`TemplateFailure`. The environment never imports Django: the limits come in the `Budget`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from jinja2 import nodes
from jinja2.runtime import ChainableUndefined, Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace, _PassArg, pass_context

INTERCEPTED = frozenset({"**", "*", "+", "%", "//"})
FORMAT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
MAX_FORMAT_WIDTH = 1000
# Filter arguments that size the result, by filter: (position after the value, keyword).
SIZE_ARGUMENTS: dict[str, tuple[int, str]] = {
    "center": (0, "width"),
    "indent": (0, "width"),
    "truncate": (0, "length"),
    "wordwrap": (0, "width"),
    "batch": (0, "linecount"),
    "slice": (0, "slices"),
}
REMOVED_GLOBALS = ("lipsum",)


class LimitExceeded(Exception):
    """An evaluation went over its budget; the message says which limit. Not a ValueError:
    some of Jinja's filters turn those into a default value."""


@dataclass
class Budget:
    """The limits of one evaluation (a render, an expression, a validation's probe) and what it
    has used so far. `probe`: validation's dry run, where an undefined name is empty."""

    time_budget_ms: int
    max_output: int
    max_iterations: int
    max_int_bits: int
    probe: bool = False
    spent: bool = False  # the CPU time is used up: a validation's later templates are skipped
    cpu_used: float = 0.0
    iterations: int = 0
    produced: int = 0
    _started: float | None = field(default=None, repr=False)

    def enter(self) -> bool:
        """Start counting CPU time; False if already counting (a nested evaluation)."""
        if self._started is not None:
            return False
        self._started = time.thread_time()
        return True

    def leave(self) -> None:
        if self._started is not None:
            self.cpu_used += time.thread_time() - self._started
            self._started = None

    def tick(self) -> None:
        """Refuse once the evaluation has used its CPU time."""
        used = self.cpu_used
        if self._started is not None:
            used += time.thread_time() - self._started
        if used * 1000 > self.time_budget_ms:
            raise LimitExceeded(f"the template used more than {self.time_budget_ms} ms of CPU time")

    def iterate(self) -> None:
        self.iterations += 1
        if self.iterations > self.max_iterations:
            raise LimitExceeded(
                f"the template's loops ran more than {self.max_iterations} iterations in all"
            )
        self.tick()

    def produce(self, chars: int) -> None:
        self.produced += chars
        if self.produced > self.max_output:
            raise LimitExceeded(f"the template produced more than {self.max_output} characters")

    def check_size(self, value: Any) -> Any:
        """`value` if it is within the size limits (a string or collection's length, an int's
        width), else LimitExceeded."""
        if isinstance(value, str | bytes | list | tuple | dict | set | frozenset):
            if len(value) > self.max_output:
                raise LimitExceeded(
                    f"a value of {len(value)} items or characters (limit {self.max_output})"
                )
        elif isinstance(value, int) and value.bit_length() > self.max_int_bits:
            raise LimitExceeded(f"an integer wider than {self.max_int_bits} bits")
        return value


CURRENT: ContextVar[Budget | None] = ContextVar("pipelines_template_budget", default=None)


def current() -> Budget:
    """The running evaluation's budget; outside one (Jinja folding at compile time), a
    budget of no time at all, so nothing unbounded runs there."""
    budget = CURRENT.get()
    if budget is None:
        raise LimitExceeded("no evaluation budget")
    return budget


class BoundedUndefined(ChainableUndefined):
    """Strict (StrictUndefined's errors) while rendering; empty in a validation probe, so the
    probe reaches the whole template without a context."""

    __slots__ = ()

    def _strict(self) -> None:
        budget = CURRENT.get()
        if budget is None or not budget.probe:
            self._fail_with_undefined_error()

    def __str__(self) -> str:
        self._strict()
        return ""

    def __iter__(self) -> Iterator[Any]:
        self._strict()
        return iter(())

    def __len__(self) -> int:
        self._strict()
        return 0

    def __bool__(self) -> bool:
        self._strict()
        return False

    def __eq__(self, other: object) -> bool:
        self._strict()
        return type(self) is type(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        self._strict()
        return id(type(self))

    def __contains__(self, item: object) -> bool:
        self._strict()
        return False

    def __getattr__(self, name: str) -> Any:
        if name[:2] == "__":
            raise AttributeError(name)
        self._strict()
        return self

    def __getitem__(self, name: str) -> Any:
        self._strict()
        return self


class BoundedNamespace(Namespace):
    """`namespace()`: an attribute set in a loop may not grow past the size limits."""

    def __setitem__(self, name: str, value: Any) -> None:
        budget = current()
        budget.check_size(value)
        budget.tick()
        super().__setitem__(name, value)


def bounded_range(*args: int) -> range:
    budget = current()
    numbers = range(*args)
    if len(numbers) > budget.max_iterations:
        raise LimitExceeded(
            f"range() of {len(numbers)} numbers (at most {budget.max_iterations} iterations)"
        )
    return numbers


@pass_context
def bounded_loop(context: Context, iterable: Iterable[Any]) -> Iterator[Any]:
    budget = current()
    for item in iterable:
        budget.iterate()
        yield item


@pass_context
def bounded_out(context: Context, value: Any) -> Any:
    budget = current()
    budget.produce(len(str(value)) if not isinstance(value, str) else len(value))
    budget.tick()
    return value


@pass_context
def bounded_concat(context: Context, *parts: Any) -> str:
    budget = current()
    texts = [str(p) for p in parts]
    total = sum(len(t) for t in texts)
    if total > budget.max_output:
        raise LimitExceeded(f"~ would build {total} characters (limit {budget.max_output})")
    budget.produce(total)
    budget.tick()
    return "".join(texts)


def _check_format(template: str) -> None:
    for width, precision in FORMAT_SPEC.findall(template):
        for number in (width, precision):
            if number == "*" or (number and int(number) > MAX_FORMAT_WIDTH):
                raise LimitExceeded(f"a %-format width or precision over {MAX_FORMAT_WIDTH}")


def _replace_size(text: str, old: str, new: str) -> int:
    return len(text) + text.count(old) * (len(new) - len(old)) + (len(new) if not old else 0)


def _check_binop(budget: Budget, operator: str, left: Any, right: Any) -> None:
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints and right > 0 and abs(left) > 1:
        if right * (abs(left).bit_length() - 1) > budget.max_int_bits:
            raise LimitExceeded(f"{left}**{right} is wider than {budget.max_int_bits} bits")
    elif operator == "*" and ints:
        if left.bit_length() + right.bit_length() > budget.max_int_bits + 1:
            raise LimitExceeded(f"a product wider than {budget.max_int_bits} bits")
    elif operator == "*":
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, str | list | tuple) and isinstance(count, int):
                size = len(sequence) * max(count, 0)
                if size > budget.max_output:
                    raise LimitExceeded(
                        f"repetition to {size} items or characters (limit {budget.max_output})"
                    )
    elif operator == "+" and isinstance(left, str | list | tuple):
        if isinstance(right, str | list | tuple) and len(left) + len(right) > budget.max_output:
            raise LimitExceeded(f"+ would build more than {budget.max_output} items or characters")
    elif operator == "%" and isinstance(left, str):
        _check_format(left)


def _guard_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` behind the budget: size arguments checked before, the result's size after; called
    with the context, so Jinja never runs it at compile time."""
    pass_arg = _PassArg.from_obj(func)

    @pass_context
    def guarded(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        _check_filter_arguments(budget, name, value, args, kwargs)
        if pass_arg is _PassArg.context:
            result = func(context, value, *args, **kwargs)
        elif pass_arg is _PassArg.eval_context:
            result = func(context.eval_ctx, value, *args, **kwargs)
        elif pass_arg is _PassArg.environment:
            result = func(context.environment, value, *args, **kwargs)
        else:
            result = func(value, *args, **kwargs)
        budget.check_size(result)
        if isinstance(result, str):
            budget.produce(len(result))
        return result

    guarded.__name__ = getattr(func, "__name__", name)
    return guarded


def _check_filter_arguments(
    budget: Budget, name: str, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    if name in SIZE_ARGUMENTS:
        position, keyword = SIZE_ARGUMENTS[name]
        size = args[position] if len(args) > position else kwargs.get(keyword)
        if isinstance(size, int) and size > budget.max_output:
            raise LimitExceeded(f"{name}({size}) is over the limit of {budget.max_output}")
        if name == "indent" and isinstance(size, int):
            lines = str(value).count("\n") + 1
            if size * lines > budget.max_output:
                raise LimitExceeded(f"indent would build more than {budget.max_output} characters")
    elif name == "replace" and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        if _replace_size(str(value), old, new) > budget.max_output:
            raise LimitExceeded(f"replace would build more than {budget.max_output} characters")
    elif name == "format":
        _check_format(str(value))


# str methods whose integer arguments size the result.
SIZING_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})


def _check_call(budget: Budget, obj: Any, args: tuple[Any, ...]) -> None:
    owner = getattr(obj, "__self__", None)
    method = getattr(obj, "__name__", "")
    if isinstance(owner, str):
        if method in SIZING_METHODS and any(
            isinstance(a, int) and a > budget.max_output for a in args
        ):
            raise LimitExceeded(f"{method}() to more than {budget.max_output} characters")
        if (
            method == "replace"
            and len(args) >= 2
            and _replace_size(owner, str(args[0]), str(args[1])) > budget.max_output
        ):
            raise LimitExceeded(f"replace would build more than {budget.max_output} characters")
        if method == "join" and args and isinstance(args[0], list | tuple):
            items = args[0]
            size = sum(len(str(i)) for i in items) + len(owner) * max(len(items) - 1, 0)
            if size > budget.max_output:
                raise LimitExceeded(f"join would build more than {budget.max_output} characters")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with every evaluation bounded by the current `Budget` (module docstring)."""

    intercepted_binops = INTERCEPTED

    def __init__(self) -> None:
        super().__init__(undefined=BoundedUndefined, autoescape=False, optimized=False)
        for name in REMOVED_GLOBALS:
            self.globals.pop(name, None)
        self.globals["range"] = bounded_range
        self.globals["namespace"] = BoundedNamespace
        self.filters = {name: _guard_filter(name, f) for name, f in self.filters.items()}
        self.filters["bounded_loop"] = bounded_loop
        self.filters["bounded_out"] = bounded_out
        self.filters["bounded_concat"] = bounded_concat

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`str.format` and `format_map`: a width spec builds any length; use `|format`."""
        if getattr(value, "__name__", "") not in ("format", "format_map") or not isinstance(
            getattr(value, "__self__", None), str
        ):
            return None

        def refused(*args: Any, **kwargs: Any) -> str:
            raise LimitExceeded("str.format is not available in templates (use |format)")

        return refused

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = current()
        budget.tick()
        _check_binop(budget, operator, left, right)
        result = self.binop_table[operator](left, right)
        if isinstance(result, str | list | tuple):
            budget.produce(len(result))
        return budget.check_size(result)

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.tick()
        _check_call(budget, __obj, args)
        result = super().call(__context, __obj, *args, **kwargs)
        return budget.check_size(result)

    def _generate(
        self,
        source: nodes.Template,
        name: str | None,
        filename: str | None,
        defer_init: bool = False,
    ) -> str:
        return super()._generate(_bounded_tree(source), name, filename, defer_init)


def _filter(node: nodes.Node, name: str, args: list[nodes.Expr] | None = None) -> nodes.Filter:
    return nodes.Filter(node, name, args or [], [], None, None, lineno=node.lineno)


def _bounded_tree(tree: nodes.Template) -> nodes.Template:
    """Every loop, output and `~` of `tree` routed through the budget's filters."""
    for loop in list(tree.find_all(nodes.For)):
        loop.iter = _filter(loop.iter, "bounded_loop")
    for concat in list(tree.find_all(nodes.Concat)):
        first, *rest = concat.nodes or [nodes.Const("")]
        concat.nodes = [_filter(first, "bounded_concat", rest)]
    for output in list(tree.find_all(nodes.Output)):
        output.nodes = [_filter(child, "bounded_out") for child in output.nodes]
    return tree
