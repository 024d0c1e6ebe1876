"""Deskcomm core app: organizations and the minimal CRM records the bus talks about."""

from __future__ import annotations

import sys
from importlib import import_module
from importlib.util import find_spec

from django.apps import AppConfig, apps
from django.core.signals import request_finished, request_started


class DeskcommConfig(AppConfig):
    name = "deskcomm"
    verbose_name = "Deskcomm core"

    def ready(self) -> None:
        from deskcomm import (
            checks,  # noqa: F401  (registers the system checks)
            rls,
        )
        from deskcomm.api import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from deskcomm.crypto import register_encrypted_field
        from deskcomm.models import Contact

        register_encrypted_field(Contact.CPF_CONTEXT, "deskcomm.Contact", "cpf_encrypted")
        # Before any connection: platform processes bypass row-level security, web ones scope
        # each request (deskcomm.rls).
        rls.select_for_process(sys.argv)
        request_started.connect(rls.on_request_boundary, dispatch_uid="deskcomm.rls.started")
        request_finished.connect(rls.on_request_boundary, dispatch_uid="deskcomm.rls.finished")

        # Scheduled jobs are declared in each app's `jobs` module (see deskcomm.cron).
        for config in apps.get_app_configs():
            if find_spec(f"{config.name}.jobs") is not None:
                import_module(f"{config.name}.jobs")

        from deskcomm.health_checks import register_defaults
        from deskcomm.sentry import init_sentry

        register_defaults()
        init_sentry()
