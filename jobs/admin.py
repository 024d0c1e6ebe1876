"""Admin for scheduled jobs: schedules that only name registered jobs, "Run now" through our job
runner (audited), each schedule's last run, and the read-only log of job runs (`JobRun`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django_celery_beat.admin import PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import PeriodicTask
from django_dramatiq.models import Task

from core import audit
from core.admin_tables import ReadOnlyAdmin
from jobs import services
from jobs.models import JobRun
from jobs.registry import RunResult, jobs


def job_choices() -> list[tuple[str, str]]:
    return [("", "---------"), *((name, name) for name in jobs.names())]


class JobScheduleForm(PeriodicTaskForm):
    """A periodic task's `task` must name a registered job (a typo is refused here, not logged
    later by the scheduler)."""

    regtask = forms.ChoiceField(label="Job (registered)", choices=job_choices, required=False)
    task = forms.CharField(
        label="Job name",
        required=False,
        max_length=200,
        help_text="Filled from the list above; it must be a registered job.",
    )

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean()
        name = data.get("task")
        if name and name not in jobs.names():
            self.add_error(
                "task", f"Unknown job {name!r}. Registered jobs: {', '.join(jobs.names())}."
            )
        return data


def _last_run(column: str) -> Subquery:
    # Served by jobrun_job_started_idx: one index probe per schedule on the page.
    runs = JobRun.objects.filter(job=OuterRef("task")).order_by("-started_at")
    return Subquery(runs.values(column)[:1])


admin.site.unregister(PeriodicTask)
# django_dramatiq's Tasks list reads its own table, which only its (unused) middleware fills: it
# always showed 0 tasks. The job queues page (jobs/admin_views.py) reads the broker's table.
admin.site.unregister(Task)


@admin.register(PeriodicTask)
class JobScheduleAdmin(PeriodicTaskAdmin):
    form = JobScheduleForm
    list_display = [
        "name", "task", "enabled", "scheduler", "last_run_at", "last_outcome", "last_duration"
    ]  # fmt: skip
    list_filter = ["enabled", "task"]
    actions = ("enable_tasks", "disable_tasks", "toggle_tasks", "run_now")

    def get_queryset(self, request: HttpRequest) -> QuerySet[PeriodicTask]:
        queryset: QuerySet[PeriodicTask] = super().get_queryset(request)
        return queryset.annotate(
            last_run_id=_last_run("id"),
            last_run_status=_last_run("status"),
            last_run_duration_ms=_last_run("duration_ms"),
        )

    @admin.display(description="last run")
    def last_outcome(self, obj: Any) -> SafeString | str:
        if obj.last_run_id is None:
            return "never run"
        url = reverse("admin:jobs_jobrun_change", args=[obj.last_run_id])
        return format_html('<a href="{}">{}</a>', url, obj.last_run_status)

    @admin.display(description="last duration")
    def last_duration(self, obj: Any) -> str:
        ms = obj.last_run_duration_ms
        return "-" if ms is None else f"{ms} ms"

    @admin.action(description="Run now (the job runs in this request)", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        actor = audit.user_actor(request)
        for task in queryset:
            if task.task not in jobs.names():
                self.message_user(
                    request, f"{task.name}: unknown job {task.task!r}, not run", messages.ERROR
                )
                continue
            self._report(request, task.name, services.job_run_now(name=task.task, actor=actor))

    def _report(self, request: HttpRequest, schedule: str, result: RunResult) -> None:
        url = reverse("admin:jobs_jobrun_change", args=[result.run_id]) if result.run_id else ""
        text = format_html(
            'Schedule {}: job {} <a href="{}">{}</a>: {} rows in {} ms{}',
            schedule,
            result.job,
            url,
            result.status,
            result.rows_processed,
            result.duration_ms,
            f" ({result.error})" if result.error else "",
        )
        level = messages.SUCCESS if result.status == "completed" else messages.ERROR
        self.message_user(request, text, level)


class JobNameFilter(admin.SimpleListFilter):
    title = "job"
    parameter_name = "job"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(name, name) for name in jobs.names()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[JobRun]) -> QuerySet[JobRun]:
        value = self.value()
        return queryset.filter(job=value) if value else queryset


@admin.register(JobRun)
class JobRunAdmin(ReadOnlyAdmin):
    """Every run of every job (schedule, HTTP, admin): read-only."""

    list_display = ["started_at", "job", "status", "trigger", "slot", "attempt"]
    list_display += ["rows_processed", "duration_ms", "short_error"]
    list_filter = (JobNameFilter, "status", "trigger", "started_at")
    ordering = ("-started_at",)
    fields = (
        "id", "job", "status", "trigger", "slot", "attempt", "rows_processed", "duration_ms",
        "started_at", "finished_at", "error",
    )  # fmt: skip
    readonly_fields = fields

    @admin.display(description="error")
    def short_error(self, obj: JobRun) -> str:
        return obj.error if len(obj.error) <= 80 else obj.error[:79] + "…"
