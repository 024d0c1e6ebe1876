"""The health endpoint's "nuvemshop" check: the last ping of each connected store, as recorded
by `health-check-integrations` (no HTTP to the shop inside the health request)."""

from __future__ import annotations

from core import rls
from nuvemshop.models import IntegrationHealth, Store


class StoreUnhealthy(Exception):
    """A connected store's last ping failed (the answer names this class; the log the stores)."""


def last_results_probe() -> None:
    """Raise StoreUnhealthy when a connected store's last ping failed."""
    with rls.scoped(bypass=True):  # a platform check over every tenant's stores
        failing = [
            f"{store.ns_store_id}: {last.error[:80]}"
            for store in Store.objects.filter(status=Store.Status.CONNECTED)
            if (
                last := IntegrationHealth.objects.filter(store=store)
                .order_by("-checked_at")
                .first()
            )
            and not last.ok
        ]
    if failing:
        raise StoreUnhealthy("last ping failed for " + "; ".join(failing))
