"""The platform's own event types: the scheduled jobs' runs, emitted by the bus for the jobs
package (eventbus.operations.job_runs; `jobs` sits below the bus and cannot declare them itself).
Owned by the platform (`system`), in the system organization; open to no door."""

from __future__ import annotations

from eventbus.store import catalog

SYSTEM = "system"

catalog.declare(
    "cron.started",
    required=("job", "run_id", "trigger"),
    description="a scheduled job run started (system organization)",
    owner=SYSTEM,
)
catalog.declare(
    "cron.completed",
    required=("job", "run_id", "trigger", "duration_ms", "rows_processed"),
    description="a scheduled job run completed",
    owner=SYSTEM,
)
catalog.declare(
    "cron.failed",
    required=("job", "run_id", "trigger", "duration_ms", "rows_processed", "error"),
    description="a scheduled job run failed (alerted)",
    owner=SYSTEM,
)
