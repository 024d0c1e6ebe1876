"""The LGPD registry (core.lgpd_registry): each app registers its categories and redaction hooks;
a taken name is refused with a clear error; categories run in their explicit order."""

from __future__ import annotations

import uuid

import pytest

from core.lgpd_registry import (
    REDACTION_HOOKS,
    REGISTRY,
    AlreadyRegistered,
    Category,
    CategoryRegistry,
    RedactionHook,
    RedactionHooks,
    autodiscover,
)
from core.models import AuditLog

# The export bundle's sections and the redaction's steps, in the order they have always run:
# the contact's related records first, the bus, core's records, the AI's, the identity last.
ORDER = [
    "conversations",
    "messages",
    "lead_activities",
    "orders",
    "consents",
    "contact_identities",
    "events",
    "webhook_deliveries",
    "audit_trail",
    "api_responses",
    "ai_derived",
    "contact",
]


def category(name: str, order: int) -> type[Category]:
    """A category class without rows (the registry never calls them)."""
    return type(f"{name}_category", (Category,), {"name": name, "order": order, "covers": {}})


def test_every_app_registers_its_categories_in_the_documented_order() -> None:
    assert [c.name for c in REGISTRY] == ORDER
    assert {type(c).__module__ for c in REGISTRY} == {
        "ai.personal_data",
        "core.personal_data",
        "crm.personal_data",
        "eventbus.personal_data",
        "webhooks.personal_data",
    }
    assert REDACTION_HOOKS.systems() == ("nuvemshop",)


def test_a_second_discovery_registers_nothing_twice() -> None:
    autodiscover()
    assert [c.name for c in REGISTRY] == ORDER


def test_categories_run_by_order_then_name_whatever_the_registration_order() -> None:
    registry = CategoryRegistry()
    for name, order in [("last", 1000), ("b", 20), ("first", 10), ("a", 20)]:
        registry.register(category(name, order))
    assert [c.name for c in registry] == ["first", "a", "b", "last"]
    assert len(registry) == 4


def test_a_taken_category_name_is_refused_naming_both_classes() -> None:
    registry = CategoryRegistry()
    registry.register(category("audit_trail", 80))
    other = category("audit_trail", 5)
    with pytest.raises(AlreadyRegistered) as refused:
        registry.register(other)
    message = str(refused.value)
    assert "LGPD category 'audit_trail'" in message
    assert f"{other.__module__}.{other.__qualname__}" in message
    assert "each category needs its own name" in message
    assert [c.order for c in registry] == [80]  # the first one stays


def test_covered_fields_name_each_model_and_field() -> None:
    registry = CategoryRegistry()
    registry.register(
        type("Audit", (Category,), {"name": "x", "order": 1, "covers": {AuditLog: ("reason",)}})
    )
    assert registry.covered_fields() == {("core.AuditLog", "reason")}


def test_redaction_hooks_run_in_order_and_name_the_systems_that_knew_the_subject() -> None:
    hooks = RedactionHooks()
    calls: list[tuple[str, uuid.UUID, uuid.UUID]] = []

    def hook(system: str, knew: bool) -> RedactionHook:
        def run(*, contact_id: uuid.UUID, request_id: uuid.UUID) -> bool:
            calls.append((system, contact_id, request_id))
            return knew

        return run

    hooks.register("shop", hook("shop", True))
    hooks.register("mailer", hook("mailer", False))
    hooks.register("archive", hook("archive", True))
    contact_id, request_id = uuid.uuid4(), uuid.uuid4()
    assert hooks.propagate(contact_id=contact_id, request_id=request_id) == ["shop", "archive"]
    assert calls == [(s, contact_id, request_id) for s in ("shop", "mailer", "archive")]
    with pytest.raises(AlreadyRegistered, match="redaction hook for 'shop' is already registered"):
        hooks.register("shop", hook("shop", False))
