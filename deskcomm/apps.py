"""Deskcomm core app: organizations and the minimal CRM records the bus talks about."""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.util import find_spec

from django.apps import AppConfig, apps
from django.core.signals import request_finished, request_started
from django.db.models.signals import post_migrate, pre_migrate


class DeskcommConfig(AppConfig):
    name = "deskcomm"
    verbose_name = "Deskcomm core"

    def ready(self) -> None:
        from deskcomm import (
            checks,  # noqa: F401  (registers the system checks)
            rls,
        )
        from deskcomm.crypto import register_encrypted_field
        from deskcomm.db import skip_health_check_when_quiet
        from deskcomm.models import Contact

        register_encrypted_field(Contact.CPF_CONTEXT, "deskcomm.Contact", "cpf_encrypted")
        # Before any connection: platform processes bypass row-level security, web ones scope
        # each request (deskcomm.rls).
        rls.select_for_process(sys.argv)
        # After Django's close_old_connections, before anything queries (deskcomm.db).
        request_started.connect(skip_health_check_when_quiet, dispatch_uid="deskcomm.db.health")
        request_started.connect(rls.on_request_boundary, dispatch_uid="deskcomm.rls.started")
        request_finished.connect(rls.on_request_boundary, dispatch_uid="deskcomm.rls.finished")

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

        from django.conf import settings

        from deskcomm.health_checks import register_defaults

        register_defaults()
        if settings.SENTRY_DSN:  # the SDK (~25 MB with its HTTP stack) only where it reports
            from deskcomm.sentry import init_sentry

            init_sentry()

        from deskcomm.metrics import JobsCollector, register_scrape_collector
        from deskcomm.migrate_hooks import install_schedules_after_migrate

        register_scrape_collector(JobsCollector)

        # After the last app's migrations (django_celery_beat's tables exist by then).
        post_migrate.connect(install_schedules_after_migrate, sender=self)
