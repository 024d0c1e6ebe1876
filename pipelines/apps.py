"""Pipelines app configuration."""

from __future__ import annotations

from django.apps import AppConfig


class PipelinesConfig(AppConfig):
    name = "pipelines"
    verbose_name = "Pipelines"

    def ready(self) -> None:
        from pipelines import scopes  # noqa: F401  (declares pipelines:* and orders:write)
