"""The core app: tenancy, API keys and scopes, audit, the API machinery, database, logging,
crypto, health, the outbound HTTP client and the LGPD registry. It imports no other project app
(each app's `personal_data` module is found by name at start-up, see core.lgpd_registry)."""

from __future__ import annotations

import sys

from django.apps import AppConfig
from django.conf import settings
from django.core.signals import request_finished, request_started
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate, pre_migrate


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Deskcomm core"

    def ready(self) -> None:
        from core import (
            checks,  # noqa: F401  (registers the system checks)
            pooler,
            pooler_checks,  # noqa: F401  (registers the pooler's system checks)
            rls,
        )
        from core.db import skip_health_check_when_quiet
        from core.db_timeouts import (
            lift_statement_timeout_for_migrate,
            restore_statement_timeout_after_migrate,
        )
        from core.health.checks import register_defaults
        from core.metrics import install_query_timer, register_scrape_collector
        from core.replica import checks as replica_checks  # noqa: F401  (registers them too)

        # Before any connection: session commands skip a transaction-mode pooler (core.pooler);
        # platform processes bypass row-level security, web ones scope each request (core.rls).
        pooler.select_for_process(sys.argv)
        rls.select_for_process(sys.argv)
        connection_created.connect(pooler.install, dispatch_uid="core.pooler.install")
        # After the pooler's wrapper, so inside it: the statement's own time (core.metrics).
        connection_created.connect(install_query_timer, dispatch_uid="core.metrics.queries")
        # After Django's close_old_connections, before anything queries (core.db): at a
        # request's start, and at its end, where the scope reset is the next statement.
        request_started.connect(skip_health_check_when_quiet, dispatch_uid="core.db.health")
        request_started.connect(rls.on_request_boundary, dispatch_uid="core.rls.started")
        request_finished.connect(skip_health_check_when_quiet, dispatch_uid="core.db.health.end")
        request_finished.connect(rls.on_request_boundary, dispatch_uid="core.rls.finished")
        # Sent once per app: bound to this one, so `migrate` sets and resets the timeout once.
        pre_migrate.connect(lift_statement_timeout_for_migrate, sender=self)
        post_migrate.connect(restore_statement_timeout_after_migrate, sender=self)
        register_defaults()
        from core.crypto import warn_deprecated_key_variables

        warn_deprecated_key_variables()  # ENCRYPTION_KEYS_<CONTEXT>'s former names, once
        from core import restore_scope

        restore_scope.count_after_restore(self.label)  # a restore must bring back core's tables
        from core.slow_queries import SlowStatementsCollector

        register_scrape_collector(SlowStatementsCollector)  # pg_stat_statements' top 20
        from core import lgpd_registry

        # Every installed app registers its LGPD data categories in its `personal_data` module.
        lgpd_registry.autodiscover()
        if settings.SENTRY_DSN:  # the SDK (~25 MB with its HTTP stack) only where it reports
            from core.sentry import init_sentry

            init_sentry()
