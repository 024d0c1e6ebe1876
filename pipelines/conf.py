"""The pipeline knobs, read from `settings.PIPELINES` at call time (so tests can override them)."""

from __future__ import annotations

from core.conf import AppSettings

ALLOW_PRIVATE_SETTING = "PIPELINES_ALLOW_PRIVATE_TARGETS"


class PipelineSettings(AppSettings, namespace="PIPELINES"):
    """Each `settings.PIPELINES` knob, its type and default (env names: deskcomm/settings.py)."""

    EVENT_TYPES: tuple[str, ...] = ()
    HTTP_TIMEOUT: float = 5.0
    ALLOW_PRIVATE_TARGETS: bool = False
    EXCERPT_CHARS: int = 2000  # bound on a step's recorded input/output/error


pipeline_settings = PipelineSettings()
