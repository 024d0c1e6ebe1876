"""Job write services: a job run on an operator's request, audited."""

from __future__ import annotations

from core import audit
from jobs import registry as cron


def job_run_now(*, name: str, actor: str) -> cron.RunResult:
    """Run job `name` now, in this process, through the job runner; audited with its outcome."""
    result = cron.job_run(name=name, trigger="admin")
    audit.record(
        actor=actor,
        action="job.run_now",
        target_type="deskcomm.job",
        target_id=name,
        details={**result.as_dict(), "error": result.error[:500]},
    )
    return result
