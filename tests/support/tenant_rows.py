"""A row of one organization in every table that has a tenant policy, whatever the table.

The tables are read from pg_policies, so a new tenant table is covered without being named
here: the bus's rows come from a real emit (the catalog's checks hold), every other table's
from its Django model, each required field filled with a plain value of its type and each
required relation with a row of the same organization (made the same way)."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import uuid
from typing import Any

from django.apps import apps
from django.db import connection, models
from django.utils import timezone

import eventbus
from core.models import Organization
from eventbus.store.models import Delivery, DeliveryAttempt

POLICY_TABLES_SQL = "SELECT DISTINCT tablename FROM pg_policies WHERE schemaname = 'public'"
_counter = itertools.count(1)


def policy_tables() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(POLICY_TABLES_SQL + " ORDER BY 1")
        return [row[0] for row in cursor.fetchall()]


def model_of(table: str) -> type[models.Model] | None:
    for model in apps.get_models():
        meta = model._meta
        if meta.db_table == table and not meta.proxy and meta.managed:
            return model
    return None


def seed(organization: Organization) -> None:
    """At least one row of `organization` in every policy table (run as a bypassing role)."""
    made: dict[type[models.Model], models.Model] = {}
    event = eventbus.emit(
        "test.effect", organization=organization, entity_kind="t", payload={"n": next(_counter)}
    )
    delivery = Delivery.objects.filter(event_id=event.id).first()
    assert delivery is not None, "test.effect has no consumer: no delivery to seed"
    made[Delivery] = delivery
    made[DeliveryAttempt] = DeliveryAttempt.objects.create(
        delivery=delivery,
        attempt=1,
        outcome=_value(DeliveryAttempt._meta.get_field("outcome")),
        created_at=timezone.now(),
    )
    for table in policy_tables():
        model = model_of(table)
        if model is None or _has_row(model, organization):
            continue
        made[model] = build(model, organization, made)


def _has_row(model: type[models.Model], organization: Organization) -> bool:
    names = {field.name for field in model._meta.concrete_fields}
    if "organization" in names:
        return model.objects.filter(organization=organization).exists()  # type: ignore[attr-defined]
    if "organization_id" in names:
        return model.objects.filter(organization_id=organization.pk).exists()  # type: ignore[attr-defined]
    return False


def build(
    model: type[models.Model], organization: Organization, made: dict[Any, models.Model]
) -> models.Model:
    """A row of `model`: each required field a plain value, each required relation a row made
    the same way (or the one in `made`), the organization `organization`."""
    values: dict[str, Any] = {}
    for field in model._meta.concrete_fields:
        if field.is_relation:
            related = field.related_model
            if related is Organization:
                values[field.name] = organization
            elif not field.null:
                assert isinstance(related, type)
                values[field.name] = made.get(related) or build(related, organization, made)
                made.setdefault(related, values[field.name])
            continue
        if field.name == "organization_id":
            values[field.name] = organization.pk
        elif _required(field):
            values[field.name] = _value(field)
    return model.objects.create(**values)  # type: ignore[attr-defined]


def _required(field: models.Field[Any, Any]) -> bool:
    automatic = getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False)
    generated = isinstance(field, (models.AutoField, models.BigAutoField, models.SmallAutoField))
    return not (generated or field.null or field.has_default() or automatic)


def _value(field: models.Field[Any, Any]) -> Any:
    if field.choices:
        return next(iter(field.flatchoices))[0]
    n = next(_counter)
    if isinstance(field, models.BooleanField):
        return True
    if isinstance(field, models.DateTimeField):
        return timezone.now()
    if isinstance(field, models.DateField):
        return dt.date.today() - dt.timedelta(days=n)
    if isinstance(field, models.DecimalField):
        return decimal.Decimal(0)
    if isinstance(field, models.UUIDField):
        return uuid.uuid4()
    if isinstance(field, (models.IntegerField, models.BigIntegerField)):
        return n
    internal = field.get_internal_type()
    if internal == "ArrayField":
        return []
    if internal == "VectorField":
        return [0.0] * int(getattr(field, "dimensions", 0) or 384)
    if isinstance(field, (models.CharField, models.TextField)):
        text = f"x{n}-{uuid.uuid4().hex}"
        return text[: field.max_length] if field.max_length else text
    raise TypeError(f"no sample value for {field.model._meta.label}.{field.name} ({internal})")
