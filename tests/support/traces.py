"""Search every text, JSON and array column of the project for strings (the LGPD "no trace")."""

from __future__ import annotations

from collections.abc import Iterable

from django.apps import apps
from django.db import models
from django.db.models import TextField
from django.db.models.functions import Cast

TEXT_TYPES = ("CharField", "TextField", "EmailField", "SlugField", "URLField", "JSONField")


def text_columns() -> list[tuple[type[models.Model], str]]:
    """Every text, JSON and array column of every concrete model in the project."""
    found = []
    for model in apps.get_models():
        if model._meta.proxy or not model._meta.managed:
            continue
        for field in model._meta.concrete_fields:
            if field.get_internal_type() in (*TEXT_TYPES, "ArrayField"):
                found.append((model, field.name))
    return found


def traces(needles: Iterable[str]) -> list[str]:
    """`model.field ~ needle` for every column anywhere that still holds one of the needles."""
    hits = []
    wanted = list(needles)
    for model, name in text_columns():
        rows = model._default_manager.annotate(_as_text=Cast(name, TextField()))
        for needle in wanted:
            if rows.filter(_as_text__icontains=needle).exists():
                hits.append(f"{model._meta.label}.{name} ~ {needle}")
    return hits
