"""Deskcomm core app: organizations and the minimal CRM records the bus talks about."""

from __future__ import annotations

from django.apps import AppConfig


class DeskcommConfig(AppConfig):
    name = "deskcomm"
    verbose_name = "Deskcomm core"

    def ready(self) -> None:
        from deskcomm import checks  # noqa: F401  (registers the system checks)
        from deskcomm.api import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from deskcomm.health_checks import register_defaults
        from deskcomm.sentry import init_sentry

        register_defaults()
        init_sentry()
