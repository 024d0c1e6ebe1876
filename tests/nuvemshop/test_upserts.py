"""Reading the store's shapes: money strings as cents, per-language texts, ISO dates."""

from __future__ import annotations

import datetime as dt

import pytest

from nuvemshop.upserts import cents, localized, when


@pytest.mark.parametrize(
    ("value", "expected"), [("58.00", 5800), ("19.9", 1990), (None, 0), ("x", 0), (12, 1200)]
)
def test_cents(value: object, expected: int) -> None:
    assert cents(value) == expected


def test_localized_prefers_portuguese() -> None:
    assert localized({"es": "Camisa", "pt": "Camiseta"}) == "Camiseta"
    assert localized({"fr": "Chemise"}) == "Chemise"
    assert localized("plain") == "plain"
    assert localized(None) == ""


def test_when_reads_the_apis_offsets() -> None:
    parsed = when("2026-12-01T10:05:00-03:00")
    assert parsed == dt.datetime(2026, 12, 1, 13, 5, tzinfo=dt.UTC)
    assert when(None) is None and when("") is None
