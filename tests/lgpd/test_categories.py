"""Exhaustiveness: every field marked as personal data is covered by a data category, and every
table that points at a contact declares its personal data (so a new one cannot slip through)."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import models

from core.lgpd_registry import REGISTRY, covered_fields
from core.lgpd_subject import REDACTED, Subject
from crm.models import Contact


def marked_fields() -> set[tuple[str, str]]:
    """(model, field) marked PERSONAL_DATA; proxies share their concrete model's table."""
    return {
        (model._meta.label, name)
        for model in apps.get_models()
        if not model._meta.proxy
        for name in getattr(model, "PERSONAL_DATA", ())
    }


def test_every_personal_field_is_covered_by_a_category() -> None:
    missing = marked_fields() - covered_fields()
    assert not missing, f"personal fields no LGPD category exports/redacts: {sorted(missing)}"


def test_categories_cover_only_real_marked_fields() -> None:
    unmarked = covered_fields() - marked_fields()
    assert not unmarked, f"covered but not marked PERSONAL_DATA: {sorted(unmarked)}"
    for label, name in covered_fields():
        apps.get_model(label)._meta.get_field(name)  # raises for a typo


def test_every_model_linked_to_a_contact_declares_its_personal_data() -> None:
    def linked(model: type[models.Model]) -> bool:
        return any(
            getattr(field, "related_model", None) is Contact
            for field in model._meta.concrete_fields
        )

    undeclared = [
        model._meta.label
        for model in apps.get_models()
        if linked(model) and not hasattr(model, "PERSONAL_DATA") and model._meta.app_label != "lgpd"
    ]
    assert undeclared == []


def test_category_names_are_unique() -> None:
    names = [category.name for category in REGISTRY]
    assert len(names) == len(set(names))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sou Maria Souza", "Sou [redacted]"),
        ("maria SOUZA ligou", "[redacted] ligou"),
        ("CPF 987.654.321-00 de outra pessoa", "CPF [redacted] de outra pessoa"),
        ("write to x.y@z.com.br now", "write to [redacted] now"),
        ("zap (11) 91234-5678 ou +55 21 99999-0000", "zap [redacted] ou [redacted]"),
        ("pedido 42 em 2026-11-29", "pedido 42 em 2026-11-29"),
    ],
)
def test_free_text_scrubbing(text: str, expected: str) -> None:
    subject = Subject(Contact(name="Maria Souza"), ("Maria Souza",), ("Maria", "Souza"))
    assert subject.scrub(text) == expected
    assert REDACTED not in subject.scrub("nothing personal here")


def test_json_scrubbing_keeps_structure_dates_and_numbers() -> None:
    subject = Subject(Contact(name="Ana"), ("Ana Lima", "ana@x.com"), ("Lima",))
    value = {"who": "Ana Lima", "at": "2026-11-29T10:00:00+00:00", "n": 5, "to": ["ana@x.com"]}
    assert subject.scrub_json(value) == {
        "who": "[redacted]",
        "at": "2026-11-29T10:00:00+00:00",
        "n": 5,
        "to": ["[redacted]"],
    }
