"""Pipelines app configuration."""

from __future__ import annotations

from django.apps import AppConfig


class PipelinesConfig(AppConfig):
    name = "pipelines"
    verbose_name = "Pipelines"

    def ready(self) -> None:
        from core.crypto import register_encrypted_field
        from pipelines import scopes  # noqa: F401  (declares pipelines:* and orders:write)
        from pipelines.secrets import CONTEXT

        register_encrypted_field(CONTEXT, "pipelines.Pipeline", "secret_headers_encrypted")
