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
    # Bounds on tenant-written templates and expressions (pipelines.sandbox), per validation of
    # a definition and per run: CPU time, characters produced, loop iterations, integer width.
    TEMPLATE_TIME_BUDGET_MS: int = 50
    TEMPLATE_MAX_OUTPUT: int = 1_000_000
    TEMPLATE_MAX_ITERATIONS: int = 10_000
    TEMPLATE_MAX_INT_BITS: int = 4096
    # The compiled-template cache: at most this many entries and characters of source.
    TEMPLATE_CACHE_ENTRIES: int = 256
    TEMPLATE_CACHE_CHARS: int = 1_000_000


pipeline_settings = PipelineSettings()
