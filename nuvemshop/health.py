"""The health endpoint's "nuvemshop" check: the last ping of each connected store (no HTTP in
the health request; `health-check-integrations` does the pinging)."""

from __future__ import annotations

from nuvemshop.models import IntegrationHealth, Store


def any_store() -> bool:
    return Store.objects.filter(status=Store.Status.CONNECTED).exists()


def last_results_probe() -> None:
    """Raise when a connected store's last ping failed."""
    failing = []
    for store in Store.objects.filter(status=Store.Status.CONNECTED):
        last = IntegrationHealth.objects.filter(store=store).order_by("-checked_at").first()
        if last is not None and not last.ok:
            failing.append(f"{store.ns_store_id}: {last.error[:80]}")
    if failing:
        raise RuntimeError("last ping failed for " + "; ".join(failing))
