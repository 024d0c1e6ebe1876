"""Job runs as events: each run's start and end as `cron.*` events of the system organization."""

from __future__ import annotations

import uuid
from typing import Any

from core.models import Organization
from eventbus.store.emitter import emit


def record_job_run(event_type: str, run_id: uuid.UUID, payload: dict[str, Any]) -> None:
    """The bus's `jobs.registry.on_run` listener (registered in `EventbusConfig.ready`)."""
    emit(
        event_type,
        organization=Organization.objects.system(),
        entity_kind="cron_job",
        entity_id=run_id,
        payload=payload,
    )
