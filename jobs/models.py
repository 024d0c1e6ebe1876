"""Records of the job machinery: one row per run of a scheduled job, and the default schedules
as last installed (tables created by the `deskcomm` app's migrations and kept, `db_table`)."""

from __future__ import annotations

import uuid

from django.db import models
from django.db.models import Q


class JobRun(models.Model):
    """One run of a scheduled job: its slot makes a second firing of the same slot a no-op.

    Written only by `jobs.registry`; the event log also records each run (`cron.*` events).
    """

    class Status(models.TextChoices):
        RUNNING = "running"
        COMPLETED = "completed"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    job = models.TextField()
    # Schedule slot (e.g. "2026-01-01T03:00:00+00:00"); null for runs by HTTP or by hand.
    slot = models.TextField(null=True, blank=True)
    trigger = models.TextField()  # schedule | http | manual
    status = models.TextField(choices=Status.choices)
    attempt = models.SmallIntegerField(default=1)
    rows_processed = models.BigIntegerField(null=True, blank=True)
    duration_ms = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "deskcomm_jobrun"  # kept from the deskcomm app
        constraints = [
            # A slot runs once (a failed slot may be retried; see jobs.registry.START_RUN_SQL).
            models.UniqueConstraint(
                fields=["job", "slot"], condition=Q(slot__isnull=False), name="jobrun_slot_uniq"
            )
        ]
        indexes = [models.Index(fields=["job", "-started_at"], name="jobrun_job_started_idx")]

    def __str__(self) -> str:
        return f"{self.job} {self.slot or self.trigger} {self.status}"


class DefaultSchedule(models.Model):
    """The default schedule last installed under a name (a fingerprint of the periodic task as
    installed), so `install_schedules` can update defaults without wiping operator edits."""

    name = models.TextField(primary_key=True)
    fingerprint = models.TextField()
    installed_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "deskcomm_defaultschedule"  # kept from the deskcomm app

    def __str__(self) -> str:
        return self.name
