"""The periodic work on every connected store: token check, health ping, abandoned carts."""

from __future__ import annotations

import datetime as dt
import logging
import time

from django.db import transaction
from django.utils import timezone

import eventbus
from core import crypto
from core.alerts import alert
from crm.models import Contact
from nuvemshop import services, upserts
from nuvemshop.client import NuvemshopClient, NuvemshopError, TokenInvalid
from nuvemshop.conf import nuvemshop_settings
from nuvemshop.models import OAUTH_CONTEXT, IntegrationHealth, Store

logger = logging.getLogger(__name__)


def connected_stores() -> list[Store]:
    return list(
        Store.objects.filter(status=Store.Status.CONNECTED).exclude(access_token_encrypted="")
    )


def tokens_refresh() -> int:
    """`oauth-refresh-tokens`: a working token is re-encrypted under the current key; a refused
    one marks the store `token_invalid` and alerts. The number of stores checked."""
    checked = 0
    for store in connected_stores():
        try:
            with NuvemshopClient(store) as api:
                details = api.get("store")
        except TokenInvalid as error:
            services.store_token_invalid(store=store, error=str(error))
            continue
        except NuvemshopError as error:
            alert("Nuvemshop token check failed", store_id=str(store.pk), error=str(error)[:200])
            continue
        Store.objects.filter(pk=store.pk).update(
            access_token_encrypted=crypto.reencrypt(OAUTH_CONTEXT, store.access_token_encrypted),
            token_checked_at=timezone.now(),
        )
        services.store_details_refresh(store=store, data=details)  # a renamed store follows
        checked += 1
    return checked


def stores_ping() -> int:
    """`health-check-integrations`: one IntegrationHealth row per connected store."""
    for store in connected_stores():
        store_ping(store)
    return len(connected_stores())


def store_ping(store: Store) -> IntegrationHealth:
    started = time.monotonic()
    error, status = "", 200
    try:
        with NuvemshopClient(store) as api:
            api.get("store")
    except TokenInvalid as failure:
        error, status = str(failure)[:500], 401
    except NuvemshopError as failure:
        error, status = str(failure)[:500], 0
    previous = IntegrationHealth.objects.filter(store=store).order_by("-checked_at").first()
    failures = 0 if not error else (previous.consecutive_failures if previous else 0) + 1
    row = IntegrationHealth.objects.create(
        organization_id=store.organization_id,
        store=store,
        ok=not error,
        status_code=status or None,
        latency_ms=int((time.monotonic() - started) * 1000),
        error=error,
        consecutive_failures=failures,
        checked_at=timezone.now(),
    )
    if failures == nuvemshop_settings.HEALTH_ALERT_AFTER_FAILURES:
        alert(
            "Nuvemshop store unhealthy",
            store_id=str(store.pk),
            consecutive_failures=failures,
            error=error[:200],
        )
    return row


def carts_poll() -> int:
    """Abandoned checkouts of the last CART_LOOKBACK_HOURS: one event per cart, ever."""
    emitted = 0
    since = timezone.now() - dt.timedelta(hours=nuvemshop_settings.CART_LOOKBACK_HOURS)
    for store in connected_stores():
        try:
            with NuvemshopClient(store) as api:
                carts = list(api.pages("checkouts", created_at_min=since.isoformat()))
        except NuvemshopError as error:
            logger.warning(
                "abandoned checkouts unavailable",
                extra={"store_id": str(store.pk), "error": str(error)[:200]},
            )
            continue
        with transaction.atomic():
            for cart in carts:
                try:
                    value_cents = upserts.cents(cart.get("total"), name="total")
                except upserts.BadRecord as error:  # one bad cart does not hide the others
                    logger.warning(
                        "abandoned checkout skipped",
                        extra={
                            "store_id": str(store.pk),
                            "cart_id": cart.get("id"),
                            "error": str(error),
                        },
                    )
                    continue
                _emit_cart(store, cart, value_cents)
                emitted += 1
        Store.objects.filter(pk=store.pk).update(carts_polled_at=timezone.now())
    return emitted


def _emit_cart(store: Store, cart: dict[str, object], value_cents: int) -> None:
    email = str(cart.get("contact_email") or "")
    contact = (
        Contact.objects.filter(organization_id=store.organization_id, email__iexact=email).first()
        if email
        else None
    )
    abandoned = upserts.when(cart.get("updated_at")) or upserts.when(cart.get("created_at"))
    eventbus.emit(
        "nuvemshop.cart_abandoned",
        organization=store.organization_id,
        entity_kind="nuvemshop_cart",
        payload={
            "cart_id": str(cart["id"]),
            "contact_id": str(contact.pk) if contact else None,
            "value_cents": value_cents,
            "abandoned_at": (abandoned or timezone.now()).isoformat(),
        },
        idempotency_key=f"nuvemshop.cart_abandoned:{store.ns_store_id}:{cart['id']}",
    )
