"""Reads of the pipelines app, always scoped by organization (None for another tenant's ids)."""

from __future__ import annotations

import uuid

from django.db.models import QuerySet

from core import flag_state
from pipelines.models import Execution, Pipeline


def enabled_pipeline(organization_id: uuid.UUID, trigger: str) -> Pipeline | None:
    """The organization's enabled pipeline for `trigger`; None when it has none or its
    `pipelines` flag is off (core.flags: every trigger pauses, nothing is deleted)."""
    if not flag_state.enabled(organization_id, "pipelines"):
        return None
    return Pipeline.objects.filter(
        organization_id=organization_id, trigger=trigger, enabled=True
    ).first()


def pipeline_list(organization_id: uuid.UUID) -> QuerySet[Pipeline]:
    return Pipeline.objects.filter(organization_id=organization_id).order_by("created_at", "id")


def pipeline_get(organization_id: uuid.UUID, pipeline_id: uuid.UUID) -> Pipeline | None:
    return Pipeline.objects.filter(organization_id=organization_id, pk=pipeline_id).first()


def execution_list(
    pipeline: Pipeline, *, status: str | None = None, limit: int = 50
) -> list[Execution]:
    rows = Execution.objects.filter(pipeline=pipeline, organization_id=pipeline.organization_id)
    if status:
        rows = rows.filter(status=status)
    return list(rows.prefetch_related("steps").order_by("-started_at", "-id")[:limit])
