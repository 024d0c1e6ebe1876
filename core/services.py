"""Core write services: API keys (create, revoke, mark used) and the idempotency-key purge."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from core import api_keys, audit, scopes
from core.api.conf import api_settings
from core.models import ApiKey, IdempotencyKey, Organization

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


def idempotency_expiry_cutoff() -> dt.datetime:
    """Stored Idempotency-Key responses created before this have expired (API_IDEMPOTENCY_TTL)."""
    return timezone.now() - dt.timedelta(seconds=api_settings.IDEMPOTENCY_TTL_SECONDS)


def idempotency_keys_purge(*, older_than: dt.datetime) -> int:
    """Delete stored idempotent responses created before `older_than`; returns how many."""
    deleted, _ = IdempotencyKey.objects.filter(created_at__lt=older_than).delete()
    return deleted
