"""Core write services: API keys (create, revoke, mark used), the idempotency-key purge, orders,
a job run on an operator's request."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

import eventbus
from deskcomm import api_keys, audit, cron, scopes
from deskcomm.models import ApiKey, IdempotencyKey, Order, Organization

KEY_GENERATION_TRIES = 3


def api_key_create(
    *, organization: Organization, name: str, scopes_granted: Iterable[str], actor: str
) -> tuple[ApiKey, str]:
    """Create a key with declared scopes; returns it and the full key (shown once, never stored).

    Raises ValueError (scopes.UnknownScopeError for unknown scopes) and writes nothing on bad input.
    """
    clean_name = (name or "").strip()
    if not clean_name or len(clean_name) > 100:
        raise ValueError("name is required (at most 100 characters)")
    granted = scopes.validate(scopes_granted)
    if not granted:
        raise ValueError("at least one scope is required")
    for _ in range(KEY_GENERATION_TRIES):  # a 48-bit prefix collision is rare; never fatal
        issued = api_keys.generate()
        try:
            with transaction.atomic():
                key = _insert_key(organization, clean_name, granted, issued, actor)
        except IntegrityError:
            continue
        return key, issued.full
    raise RuntimeError("could not generate a unique API key prefix")


def _insert_key(
    organization: Organization,
    name: str,
    granted: list[str],
    issued: api_keys.IssuedKey,
    actor: str,
) -> ApiKey:
    key = ApiKey.objects.create(
        organization=organization,
        name=name,
        prefix=issued.prefix,
        secret_hash=issued.secret_hash,
        scopes=granted,
        created_by=actor,
    )
    audit.record(
        actor=actor,
        action="api_key.create",
        target_type="deskcomm.apikey",
        target_id=key.pk,
        organization_id=organization.pk,
        details={"prefix": key.display_prefix, "name": name, "scopes": granted},
    )
    return key


def api_key_revoke(*, api_key: ApiKey, actor: str, reason: str = "") -> bool:
    """Revoke a key at once (its next request gets 401); False when it was already revoked."""
    now = timezone.now()
    with transaction.atomic():
        changed = ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(
            revoked_at=now
        )
        if changed:
            audit.record(
                actor=actor,
                action="api_key.revoke",
                target_type="deskcomm.apikey",
                target_id=api_key.pk,
                organization_id=api_key.organization_id,
                reason=reason,
                details={"prefix": api_key.display_prefix},
            )
    api_key.revoked_at = api_key.revoked_at or now
    return bool(changed)


def api_key_mark_used(*, api_key: ApiKey, resolution: dt.timedelta) -> None:
    """Record use, at most once per `resolution`: no write per request on a busy key."""
    now = timezone.now()
    if api_key.last_used_at is not None and now - api_key.last_used_at < resolution:
        return
    # Conditional: of many concurrent requests only the first writes.
    ApiKey.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - resolution), pk=api_key.pk
    ).update(last_used_at=now)
    api_key.last_used_at = now


def idempotency_keys_purge(*, older_than: dt.datetime) -> int:
    """Delete stored idempotent responses created before `older_than`; returns how many."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=older_than).delete()
    return deleted


def order_confirm(
    *, organization: Organization, number: str, total_cents: int, currency: str = "BRL"
) -> Order:
    """Confirm order `number` and emit `order.confirmed` in the same transaction (seed 004).

    Either the order and its event commit together or neither does. Confirming an order that is
    already confirmed returns it unchanged (no second event).
    """
    if not number or not number.strip():
        raise ValueError("an order number is required")
    if total_cents < 0:
        raise ValueError(f"total_cents must not be negative, got {total_cents}")
    with transaction.atomic():
        order, _ = Order.objects.select_for_update().get_or_create(
            organization=organization,
            number=number.strip(),
            defaults={"total_cents": total_cents, "currency": currency},
        )
        if order.status == Order.Status.CONFIRMED:
            return order
        order.status = Order.Status.CONFIRMED
        order.confirmed_at = timezone.now()
        order.save(update_fields=["status", "confirmed_at"])
        eventbus.emit(
            "order.confirmed",
            organization=organization,
            entity_kind="order",
            entity_id=order.id,
            payload={
                "order_id": str(order.id),
                "number": order.number,
                "total_cents": order.total_cents,
                "currency": order.currency,
                "confirmed_at": order.confirmed_at.isoformat(),
            },
            idempotency_key=f"order.confirmed:{order.id}",
        )
    return order


def job_run_now(*, name: str, actor: str) -> cron.RunResult:
    """Run job `name` now, in this process, through the job runner; audited with its outcome."""
    result = cron.job_run(name=name, trigger="admin")
    audit.record(
        actor=actor,
        action="job.run_now",
        target_type="deskcomm.job",
        target_id=name,
        details={**result.as_dict(), "error": result.error[:500]},
    )
    return result
