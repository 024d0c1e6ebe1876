"""Event bus app: discovers consumers at start-up and mirrors them for the SQL emit function."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from importlib.util import find_spec
from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate

# Discovered in every installed app: every app's `events` first (the whole vocabulary), then
# every app's `handlers` (a consumer may take another app's types).
APP_MODULES = ("events", "handlers")


class EventbusConfig(AppConfig):
    name = "eventbus"
    verbose_name = "Event bus"

    def ready(self) -> None:
        from core import admin_links, restore_scope
        from eventbus.api import scopes  # noqa: F401  (declares the API key scopes)
        from eventbus.operations import checks  # noqa: F401  (registers the system checks)
        from eventbus.store.conf import bus_settings

        for module in handler_modules(bus_settings.HANDLER_MODULES):
            import_module(module)
        post_migrate.connect(_sync_after_migrate, sender=self)
        restore_scope.count_after_restore(self.label)  # the log and deliveries, after a restore
        # The core admin's links into the bus's pages (core.admin_links).
        admin_links.link_organization("events", "admin:eventbus_eventlog_changelist")
        admin_links.link_organization("dead letters", "admin:eventbus_deadletter_changelist")
        admin_links.link_audit_target(
            "eventbus.delivery", "admin:eventbus_delivery_change", "delivery"
        )
        admin_links.link_request("eventbus_ops:correlation")

        from core.health import registry as health
        from core.metrics import register_scrape_collector
        from eventbus.history.partitions import check_partitions_ahead
        from eventbus.operations.gauges import QueueCollector, TenantCollector
        from eventbus.operations.job_runs import record_job_run
        from jobs.registry import on_run

        # Partitioned log only: fewer months ready ahead than wanted (emits fail past the last).
        health.register("event_log_partitions", check_partitions_ahead, required=False)
        register_scrape_collector(QueueCollector)
        register_scrape_collector(TenantCollector)
        on_run(record_job_run)


def handler_modules(extra: Sequence[str]) -> list[str]:
    """Every installed app's `events` module (the event types it declares) and `handlers`
    module (its consumers), then the configured extra modules."""
    found = [
        f"{config.name}.{module}"
        for module in APP_MODULES
        for config in apps.get_app_configs()
        if find_spec(f"{config.name}.{module}") is not None
    ]
    return found + [m for m in extra if m not in found]


ROUTE_TABLES = ("eventbus_route", "eventbus_eventtypeschema")


def _sync_after_migrate(using: str = "default", **kwargs: Any) -> None:
    from eventbus.store.routes import sync_routes
    from jobs.migrate_hooks import tables_exist

    # Absent after `migrate eventbus zero`; and a partial migrate (to an older migration) leaves
    # the tables without the columns this code writes: the next full migrate, or a worker's
    # start, syncs them.
    if tables_exist(using, *ROUTE_TABLES) and _fully_migrated(using, "eventbus"):
        sync_routes()


def _fully_migrated(using: str, app_label: str) -> bool:
    """Whether every migration of `app_label` in the code is applied on `using`."""
    from django.db import connections
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[using])
    leaves = [node for node in executor.loader.graph.leaf_nodes() if node[0] == app_label]
    return not executor.migration_plan(leaves)
