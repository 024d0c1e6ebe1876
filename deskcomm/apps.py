"""Deskcomm core app: organizations and the minimal CRM records the bus talks about."""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate, pre_migrate


class DeskcommConfig(AppConfig):
    name = "deskcomm"
    verbose_name = "Deskcomm core"

    def ready(self) -> None:
        from deskcomm import checks  # noqa: F401  (registers the system checks)
        from deskcomm.api import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from deskcomm.db_timeouts import (
            lift_statement_timeout_for_migrate,
            restore_statement_timeout_after_migrate,
        )

        # Sent once per app: bound to this one, so `migrate` sets and resets the timeout once.
        pre_migrate.connect(lift_statement_timeout_for_migrate, sender=self)
        post_migrate.connect(restore_statement_timeout_after_migrate, sender=self)

        # Scheduled jobs are declared in each app's `jobs` module (see deskcomm.cron).
        for config in apps.get_app_configs():
            if find_spec(f"{config.name}.jobs") is not None:
                import_module(f"{config.name}.jobs")

        from deskcomm.health_checks import register_defaults
        from deskcomm.sentry import init_sentry

        register_defaults()
        init_sentry()

        from deskcomm.metrics import JobsCollector, register_scrape_collector
        from deskcomm.migrate_hooks import install_schedules_after_migrate

        register_scrape_collector(JobsCollector)

        # After the last app's migrations (django_celery_beat's tables exist by then).
        post_migrate.connect(install_schedules_after_migrate, sender=self)
