"""eventbus.store.storable: the nesting depth read from JSON text, and text PostgreSQL can store."""

from __future__ import annotations

import random

import pytest

from eventbus.store.errors import EventValidationError
from eventbus.store.storable import JsonLimits, check_text, json_text, nests_deeper_than

LIMITS = JsonLimits(max_bytes=10_000, bytes_setting="X", max_depth=3)
# Strings full of what the depth count must see through: brackets, quotes, escapes, accents.
TRICKY_STRINGS = ["]]]]", "[[{{", '"', '\\"]', "\\", "\\\\", 'a"}"b', "ação]", "\n[", '""', ""]


def depth(value: object) -> int:
    """The reference: containers nested, counted on the objects ({} is 1, [[]] is 2)."""
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


def random_json(rng: random.Random, levels: int) -> object:
    if levels == 0 or rng.random() < 0.2:
        return rng.choice([*TRICKY_STRINGS, 1, None, True, 2.5])
    if rng.random() < 0.5:
        return [random_json(rng, levels - 1) for _ in range(rng.randint(0, 3))]
    keys = rng.sample(TRICKY_STRINGS, rng.randint(0, 3))
    return {key: random_json(rng, levels - 1) for key in keys}


def test_the_depth_read_from_the_text_is_the_depth_of_the_objects() -> None:
    rng = random.Random(12)
    for _ in range(3000):
        value = {"v": random_json(rng, rng.randint(0, 9))}
        text = json_text("payload", value, JsonLimits(10**6, "X", 100))
        for limit in range(1, 11):
            assert nests_deeper_than(text, limit) == (depth(value) > limit), (text, limit)


@pytest.mark.parametrize(
    ("value", "deeper_than_3"),
    [
        ({"a": [{}]}, False),
        ({"a": [{"b": []}]}, True),
        ({"a": "[[[[[[", "b": {}}, False),
        ({"a": "]]]]]]", "b": [[[[]]]]}, True),
        ({'"': [[[]]], "x": '\\"[[[['}, True),
        ({"a": [[], [], [], []], "b": [{}, {}, {}]}, False),
    ],
)
def test_brackets_inside_strings_do_not_count(
    value: dict[str, object], deeper_than_3: bool
) -> None:
    if deeper_than_3:
        with pytest.raises(EventValidationError, match="nested more than 3 levels"):
            json_text("payload", value, LIMITS)
    else:
        json_text("payload", value, LIMITS)


@pytest.mark.parametrize(
    ("value", "message"),
    [("a\x00", "NUL character"), ("\ud800", "unpaired UTF-16 surrogate")],
)
def test_text_postgresql_cannot_store_is_refused_naming_the_field(value: str, message: str) -> None:
    with pytest.raises(EventValidationError, match=f"entity_kind contains an? {message}") as raised:
        check_text("entity_kind", value)
    assert raised.value.field == "entity_kind"
    assert check_text("entity_kind", "negociação") == "negociação"
