"""The bounded template sandbox (pipelines.templating, pipelines.sandbox): each classic
denial-of-service shape is refused quickly, at validation and at run time, with the limit named;
ordinary templates still render; every malformed template is a TemplateFailure."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pipelines import templating

# Each shape a tenant could write to stall a web process, and the words of its refusal.
DOS_SHAPES = {
    "power": ("{{ 7**3000000 }}", "bits"),
    "power-tower": ("{{ 2**(2**(2**(2**(2**2)))) }}", "bits"),
    "huge-product": ("{{ 10**1000 * 10**1000 * 10**1000 * 10**1000 * 10**1000 }}", "bits"),
    "string-repetition": ("{{ 'a'*10**8 }}", "repetition"),
    "list-repetition": ("{{ [0]*10**8 }}", "repetition"),
    "nested-ranges": (
        "{% for i in range(5000) %}{% for j in range(5000) %}x{% endfor %}{% endfor %}",
        "iterations",
    ),
    "big-range": ("{% for i in range(100000000) %}{% endfor %}", "range()"),
    "triple-nesting": (
        "{% for i in range(100) %}{% for j in range(100) %}{% for k in range(100) %}{{ k }}"
        "{% endfor %}{% endfor %}{% endfor %}",
        "limit",
    ),
    "loop-over-a-string": (
        "{% for a in 'x'*5000 %}{% for b in 'x'*5000 %}{% endfor %}{% endfor %}",
        "iterations",
    ),
    "doubling-namespace": (
        "{% set ns = namespace(s='a') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}",
        "characters",
    ),
    "doubling-sets": ("{% set x = 'a'*1000 %}" + "{% set x = x ~ x %}" * 40, "characters"),
    "literal-text-in-a-loop": (
        "{% for i in range(9000) %}" + "y" * 900 + "{% endfor %}",
        "characters",
    ),
    "format-width": ("{{ '%0999999999d'|format(1) }}", "width"),
    "percent-width": ("{{ '%0999999999d' % 1 }}", "width"),
    "str-format": ("{{ '{:999999999}'.format(1) }}", "format"),
    "center": ("{{ 'a'|center(1000000000) }}", "center"),
    "indent": ("{{ ('\n'*5000)|indent(100000) }}", "indent"),
    "replace": ("{{ ('a'*9000)|replace('a', 'b'*9000) }}", "replace"),
    "str-method": ("{{ 'a'.ljust(10**9) }}", "ljust"),
    "recursive-macro": ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "nested too deeply"),
    "deep-parentheses": ("{{" + "(" * 3000 + "1" + ")" * 3000 + "}}", "nested too deeply"),
    "deep-lists": ("{{" + "[" * 3000 + "]" * 3000 + "}}", "nested too deeply"),
    "huge-literal": ("{{ " + "9" * 5000 + " }}", "digits"),
    "syntax": ("{{ order. }}", "does not compile"),
    "unclosed": ("{% for x in y %}", "does not compile"),
}
# Under four test workers on two shared cores a refusal can wait for the CPU; the issue's
# 200 ms is measured by bench/template_limits.py on an idle machine.
PROMPT = 5.0


@pytest.fixture
def counted_limits_first(settings: Any) -> None:
    """The CPU-time budget (50 ms by default) raised out of the way, so each shape meets the limit
    that counts it (iterations, characters, bits) and not the clock: on a busy machine 10,000 loop
    iterations can use 50 ms of CPU. The time budget has its own test below."""
    settings.PIPELINES = {**getattr(settings, "PIPELINES", {}), "TEMPLATE_TIME_BUDGET_MS": 4000}


@pytest.mark.usefixtures("counted_limits_first")
@pytest.mark.parametrize(("source", "words"), DOS_SHAPES.values(), ids=DOS_SHAPES.keys())
def test_each_dos_shape_is_refused_quickly_when_checked(source: str, words: str) -> None:
    started = time.monotonic()
    with pytest.raises(templating.TemplateFailure) as refused:
        templating.check_template(source)
    assert time.monotonic() - started < PROMPT
    assert words in str(refused.value)


@pytest.mark.usefixtures("counted_limits_first")
@pytest.mark.parametrize(("source", "words"), DOS_SHAPES.values(), ids=DOS_SHAPES.keys())
def test_each_dos_shape_is_stopped_quickly_when_rendered(source: str, words: str) -> None:
    started = time.monotonic()
    with pytest.raises(templating.TemplateFailure) as refused:
        templating.render({"url": source}, {"order": {"number": "A-1"}})
    assert time.monotonic() - started < PROMPT
    assert words in str(refused.value)


SIZED_BY_THE_CONTEXT = {
    "nested-ranges": "{% for i in range(n) %}{% for j in range(n) %}{% endfor %}{% endfor %}",
    "power": "{{ n ** n }}",
    "repetition": "{{ 'a' * (n * n * n) }}",
    "loop-over-items": "{% for a in rows %}{% for b in rows %}{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("source", SIZED_BY_THE_CONTEXT.values(), ids=SIZED_BY_THE_CONTEXT.keys())
def test_work_sized_by_the_context_passes_validation_and_stops_at_run_time(source: str) -> None:
    templating.check_template(source)  # nothing to refuse without the context
    started = time.monotonic()
    with pytest.raises(templating.TemplateFailure, match="goes over a limit"):
        templating.render(source, {"n": 5000, "rows": list(range(5000))})
    assert time.monotonic() - started < PROMPT


def test_conditions_are_bounded_too() -> None:
    with pytest.raises(templating.TemplateFailure, match="bits"):
        templating.check_expression("7**3000000 > 1")
    with pytest.raises(templating.TemplateFailure, match="repetition"):
        templating.evaluate("('a' * n * n) == 'b'", {"n": 100000})
    with pytest.raises(templating.TemplateFailure, match="nested too deeply"):
        templating.check_expression("(" * 3000 + "1" + ")" * 3000)
    with pytest.raises(templating.TemplateFailure, match="ZeroDivisionError"):
        templating.evaluate("1 // n", {"n": 0})
    assert templating.evaluate("order.total > 10 and 'vip' in order.tags", ORDER_CONTEXT) is True


ORDER_CONTEXT: dict[str, Any] = {
    "order": {"number": "P-1", "total": 25, "tags": ["vip"], "lines": [{"sku": "A"}, {"sku": "B"}]},
    "orderNumber": "P-1",
}


def test_ordinary_templates_render_as_before() -> None:
    source = (
        "{{ orderNumber }}/{{ order.total * 2 }}/{{ order.total ** 2 }}/"
        "{% for line in order.lines %}{{ line.sku }}{{ ',' if not loop.last }}{% endfor %}/"
        "{{ order.lines|map(attribute='sku')|join('+') }}/{{ 'x' ~ order.number|lower }}/"
        "{{ '%05d'|format(order.total) }}/{{ order.number|center(7) }}"
    )
    templating.check_template(source)
    assert templating.render(source, ORDER_CONTEXT) == "P-1/50/625/A,B/A+B/xp-1/00025/  P-1  "
    with pytest.raises(templating.TemplateFailure, match="'missing' is undefined"):
        templating.render("{{ missing }}", ORDER_CONTEXT)


def test_the_limits_are_settings(settings: Any) -> None:
    settings.PIPELINES = {
        **getattr(settings, "PIPELINES", {}),
        "TEMPLATE_MAX_ITERATIONS": 10,
        "TEMPLATE_MAX_OUTPUT": 50,
        "TEMPLATE_MAX_INT_BITS": 16,
    }
    assert templating.render("{% for i in range(10) %}{% endfor %}ok", {}) == "ok"
    with pytest.raises(templating.TemplateFailure, match="more than 10 iterations"):
        templating.render(
            "{% for i in range(4) %}{% for j in range(3) %}{% endfor %}{% endfor %}", {}
        )
    with pytest.raises(templating.TemplateFailure, match="50"):
        templating.render("{{ s }}{{ s }}", {"s": "x" * 30})
    with pytest.raises(templating.TemplateFailure, match="16 bits"):
        templating.render("{{ n * n }}", {"n": 2**12})


def test_the_time_budget_is_a_setting(settings: Any) -> None:
    settings.PIPELINES = {**getattr(settings, "PIPELINES", {}), "TEMPLATE_TIME_BUDGET_MS": 1}
    slow = "{% for i in range(9000) %}{{ rows|sort|join(',') }}{% endfor %}"
    with pytest.raises(templating.TemplateFailure, match="more than 1 ms of CPU time"):
        templating.render(slow, {"rows": list(range(1000))})


def test_the_template_cache_is_bounded_in_entries_and_characters(settings: Any) -> None:
    settings.PIPELINES = {
        **getattr(settings, "PIPELINES", {}),
        "TEMPLATE_CACHE_ENTRIES": 5,
        "TEMPLATE_CACHE_CHARS": 3000,
    }
    templating.CACHE.clear()
    for n in range(20):
        templating.render(f"{{{{ {n} }}}}", {})
    assert len(templating.CACHE) == 5
    for n in range(20):
        templating.render("{{ 1 }}" + " " * 1000 + str(n), {})
    assert templating.CACHE.chars <= 3000
    assert len(templating.CACHE) <= 3
