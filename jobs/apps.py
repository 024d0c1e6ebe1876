"""The jobs app: the job registry and runs, the cron endpoint, the scheduler and the default
schedules, the dramatiq brokers and actors. It imports only `core`; the bus registers the hook
that records runs as events (`jobs.registry.on_run`)."""

from __future__ import annotations

from importlib import import_module
from importlib.util import find_spec

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Scheduled jobs"

    def ready(self) -> None:
        from core import restore_scope
        from core.metrics import register_scrape_collector
        from jobs import housekeeping  # noqa: F401  (the core layer's jobs)
        from jobs.metrics import JobsCollector
        from jobs.migrate_hooks import install_schedules_after_migrate

        # Scheduled jobs are declared in each app's `jobs` module (see jobs.registry).
        for config in apps.get_app_configs():
            if find_spec(f"{config.name}.jobs") is not None:
                import_module(f"{config.name}.jobs")
        register_scrape_collector(JobsCollector)
        restore_scope.count_after_restore(self.label)  # a restore must bring back the job runs
        # After the last app's migrations (django_celery_beat's tables exist by then).
        post_migrate.connect(install_schedules_after_migrate, sender=self)
