"""Mirror the consumer registry and the catalog into tables the `emit_event` SQL function reads."""

from __future__ import annotations

from django.db import connection, transaction

from eventbus.store import catalog
from eventbus.store.conf import bus_settings
from eventbus.store.registry import registry, route_rows

# Replace the mirror in one transaction; concurrent syncs serialise on the advisory lock.
_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext('eventbus.sync_routes'))"


def sync_routes() -> tuple[int, int]:
    """Rewrite `eventbus_route` and `eventbus_eventtypeschema`; returns (routes, event types)."""
    routes = route_rows(registry.all())
    schemas = [catalog.latest(name) for name in catalog.declared_types()]
    notify = set(bus_settings.NOTIFY_EVENT_TYPES)
    wake_at = bus_settings.NOTIFY_MIN_PRIORITY
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_LOCK_SQL)
        cursor.execute("DELETE FROM eventbus_route")
        cursor.executemany(
            "INSERT INTO eventbus_route (consumer, event_type, max_attempts, delay_seconds, "
            "ordered) VALUES (%s, %s, %s, %s, %s)",
            routes,
        )
        cursor.execute("DELETE FROM eventbus_eventtypeschema")
        cursor.executemany(
            "INSERT INTO eventbus_eventtypeschema (name, version, required, notify, priority, "
            "ordered_by) VALUES (%s, %s, %s, %s, %s, %s)",
            [
                (
                    s.name,
                    s.version,
                    list(s.required),
                    s.name in notify or catalog.priority_of(s.name) >= wake_at,
                    catalog.priority_of(s.name),
                    catalog.ordered_by(s.name),
                )
                for s in schemas
            ],
        )
    return len(routes), len(schemas)
