"""The LGPD registry: the data categories and redaction hooks every app registers.

Personal data is declared where it lives (`PERSONAL_DATA` on the model) and handled by the app
that understands it. Each app registers, in its own `personal_data` module, one `Category` per
kind of personal data it holds (able to export AND redact it) and, when a subject also lives in
a system outside this database, a redaction hook for that system. `CoreConfig.ready` imports
every installed app's `personal_data` module (`autodiscover`, as the bus finds the `events` and
`handlers` modules and the jobs app the `jobs` ones), so the `lgpd` app walks `REGISTRY` and
calls the hooks without importing the apps that registered them.

Export and redaction of a category find the subject's rows with the same `rows()` query, so what
the subject receives and what is erased can never disagree. `covers` names the personal fields
(`PERSONAL_DATA` on the models) a category is responsible for; a test checks that every marked
field is covered by some registered category.

**Order.** `REGISTRY` yields the categories by their `order`, then by name, whatever the order of
registration: the export bundle lists them so and the redaction runs them so. The bands in use:

    10-55   the CRM's records found through the contact's relations, its identities (crm)
    60-70   the bus's events and their deliveries (eventbus, webhooks)
    80-90   core's audit trail and stored API responses
    100     what the AI derived from the subject (ai)
    1000    the contact's identity (crm), last: the records above are found through it

Redaction hooks run in registration order (the installed apps' order), before the categories.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from importlib import import_module
from importlib.util import find_spec
from typing import Any, ClassVar, Protocol, TypeVar

from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.db.models import Q, QuerySet, TextField
from django.db.models.functions import Cast

from core.lgpd_subject import Subject

Rows = QuerySet[Any]
MODULE = "personal_data"  # each installed app's module that registers its categories and hooks


class Category:
    """A kind of personal data: the rows that belong to (or mention) a subject, and their fields.

    The default redaction scrubs every covered field of every row in place (free text keeps its
    meaning, the subject's identifiers go); categories that must drop identity outright override
    `redact_row`.
    """

    name: ClassVar[str]  # the category's key in the export bundle and the redaction's audit
    order: ClassVar[int]  # where it runs among the registered categories (see the module's doc)
    covers: ClassVar[dict[type[models.Model], tuple[str, ...]]]
    # Extra, non-personal fields the export shows for context (ids, timestamps, amounts).
    context_fields: ClassVar[dict[type[models.Model], tuple[str, ...]]] = {}

    def rows(self, subject: Subject, model: type[models.Model]) -> Rows:
        raise NotImplementedError

    def export(self, subject: Subject) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for model, fields in self.covers.items():
            shown = ("pk", *self.context_fields.get(model, ()), *fields)
            for row in self.rows(subject, model).order_by("pk").values(*shown):
                out.append({"record": model._meta.label, **self.exported(row)})
        return out

    def exported(self, row: dict[str, Any]) -> dict[str, Any]:
        return row

    def redact(self, subject: Subject) -> int:
        changed = 0
        for model, fields in self.covers.items():
            for row in self.rows(subject, model).order_by("pk"):
                before = [getattr(row, name) for name in fields]
                self.redact_row(row, fields, subject)
                if before != [getattr(row, name) for name in fields]:
                    row.save(update_fields=list(fields))
                    changed += 1
        return changed

    def redact_row(self, row: models.Model, fields: Sequence[str], subject: Subject) -> None:
        for name in fields:
            setattr(row, name, scrubbed(getattr(row, name), subject))


def scrubbed(value: Any, subject: Subject) -> Any:
    """A text or JSON value without the subject's identifiers."""
    if isinstance(value, str):
        return subject.scrub(value)
    return subject.scrub_json(value)


def mentioning(queryset: Rows, fields: Iterable[str], subject: Subject) -> Rows:
    """Rows where any of the fields (text or JSON, as text) contains a strong identifier."""
    if not subject.identifiers:
        return queryset.none()
    annotations = {f"_lgpd_{name}": Cast(name, TextField()) for name in fields}
    match = Q()
    for alias in annotations:
        for value in subject.identifiers:
            match |= Q(**{f"{alias}__icontains": value})
    return queryset.annotate(**annotations).filter(match)


class AlreadyRegistered(ImproperlyConfigured):
    """A second category (or redaction hook) under a name that is taken."""


C = TypeVar("C", bound=Category)


class CategoryRegistry:
    """The registered categories, iterated in their order (`order`, then name)."""

    def __init__(self) -> None:
        self._by_name: dict[str, Category] = {}
        self._ordered: tuple[Category, ...] = ()

    def register(self, category: type[C]) -> type[C]:
        """Class decorator: register one instance of the category; refuses a taken name."""
        taken = self._by_name.get(category.name)
        if taken is not None:
            raise AlreadyRegistered(
                f"LGPD category {category.name!r} of {_path(category)} is already registered by "
                f"{_path(type(taken))}: each category needs its own name (the name is its key in "
                "the export bundle)"
            )
        self._by_name[category.name] = category()
        self._ordered = tuple(sorted(self._by_name.values(), key=lambda c: (c.order, c.name)))
        return category

    def __iter__(self) -> Iterator[Category]:
        return iter(self._ordered)

    def __len__(self) -> int:
        return len(self._ordered)

    def covered_fields(self) -> set[tuple[str, str]]:
        """(model label, field) for every personal field some category is responsible for."""
        return {
            (model._meta.label, name)
            for category in self._ordered
            for model, fields in category.covers.items()
            for name in fields
        }


class RedactionHook(Protocol):
    """Carry a redaction to another system, in the redaction's transaction; True if the subject
    was known there (the redaction's scope then names that system)."""

    def __call__(self, *, contact_id: uuid.UUID, request_id: uuid.UUID) -> bool: ...


class RedactionHooks:
    """The registered redaction hooks, one per outside system, in registration order."""

    def __init__(self) -> None:
        self._hooks: dict[str, RedactionHook] = {}

    def register(self, system: str, hook: RedactionHook) -> None:
        if system in self._hooks:
            raise AlreadyRegistered(f"an LGPD redaction hook for {system!r} is already registered")
        self._hooks[system] = hook

    def systems(self) -> tuple[str, ...]:
        return tuple(self._hooks)

    def propagate(self, *, contact_id: uuid.UUID, request_id: uuid.UUID) -> list[str]:
        """Run every hook; the systems that knew the subject, in registration order."""
        return [
            system
            for system, hook in self._hooks.items()
            if hook(contact_id=contact_id, request_id=request_id)
        ]


class TombstoneLookup(Protocol):
    """Whether any of these identifiers belongs to a subject redacted in the organization."""

    def __call__(
        self, organization_id: uuid.UUID, *, email: str = "", phone: str = "", cpf: str = ""
    ) -> bool: ...


class Tombstones:
    """The lookup of redacted subjects' identifiers (the lgpd app registers it), for an import
    that may store a person again (nuvemshop's orders) without importing the lgpd app, which
    sits above the integrations. With nothing registered nothing is a tombstone."""

    def __init__(self) -> None:
        self._lookup: TombstoneLookup | None = None

    def register(self, lookup: TombstoneLookup) -> None:
        if self._lookup is not None:
            raise AlreadyRegistered("the LGPD tombstone lookup is already registered")
        self._lookup = lookup

    def redacted(
        self, organization_id: uuid.UUID, *, email: str = "", phone: str = "", cpf: str = ""
    ) -> bool:
        if self._lookup is None:
            return False
        return self._lookup(organization_id, email=email, phone=phone, cpf=cpf)


def _path(category: type[Category]) -> str:
    return f"{category.__module__}.{category.__qualname__}"


REGISTRY = CategoryRegistry()
register = REGISTRY.register
covered_fields = REGISTRY.covered_fields
REDACTION_HOOKS = RedactionHooks()
register_redaction_hook = REDACTION_HOOKS.register
TOMBSTONES = Tombstones()


def autodiscover() -> None:
    """Import every installed app's `personal_data` module (CoreConfig.ready, once)."""
    for config in apps.get_app_configs():
        if find_spec(f"{config.name}.{MODULE}") is not None:
            import_module(f"{config.name}.{MODULE}")
