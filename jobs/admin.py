"""Admin for scheduled jobs: schedules that only name registered jobs, by name, each with its
next run (from its own schedule, a crontab in its own time zone) and last run, and a "Run now"
button on every row and on its page (our job runner, in the request, audited); and the
read-only log of job runs (`JobRun`), its slots in the console's time format.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django_celery_beat.admin import PeriodicTaskAdmin, PeriodicTaskForm
from django_celery_beat.models import PeriodicTask
from django_dramatiq.models import Task

from core import admin_time, audit
from core.admin_tables import ReadOnlyAdmin
from jobs import schedules, services
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
        "name", "run_now_button", "task", "enabled", "scheduler", "next_run", "last_outcome",
        "last_duration",
    ]  # fmt: skip
    list_filter = ["enabled", "task"]
    ordering = ("name",)
    actions = ("enable_tasks", "disable_tasks", "toggle_tasks", "run_now")
    change_form_template = "admin/jobs/schedule_change_form.html"

    def get_list_display(self, request: HttpRequest) -> Any:
        """The run button only for those who may run (the change permission)."""
        shown = list(super().get_list_display(request))
        if self.has_change_permission(request):
            return shown
        return [column for column in shown if column != "run_now_button"]

    def get_urls(self) -> list[URLPattern]:
        run_now = self.admin_site.admin_view(self.run_now_view)
        name = f"{self.opts.app_label}_{self.opts.model_name}_run_now"
        return [path("<path:object_id>/run-now/", run_now, name=name), *super().get_urls()]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PeriodicTask]:
        queryset: QuerySet[PeriodicTask] = super().get_queryset(request)
        return queryset.annotate(
            last_run_id=_last_run("id"),
            last_run_status=_last_run("status"),
            last_run_started_at=_last_run("started_at"),
            last_run_duration_ms=_last_run("duration_ms"),
        )

    @admin.display(description="next run")
    def next_run(self, obj: PeriodicTask) -> SafeString | str:
        return next_run_html(schedules.next_run(obj))

    @admin.display(description="run")
    def run_now_button(self, obj: PeriodicTask) -> SafeString:
        """A button of the changelist's own form (its CSRF token) posting to this row's run."""
        return format_html(
            '<button type="submit" class="button dc-run-now" name="run_now" formaction="{}" '
            'style="white-space:nowrap" title="Run {} now, in this request">Run now</button>',
            reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_run_now", args=[obj.pk]),
            obj.task,
        )

    def run_now_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """POST: run this schedule's job now (audited), then back to where the button was."""
        return _run_now(self, request, object_id)

    @admin.display(description="last run")
    def last_outcome(self, obj: Any) -> SafeString | str:
        if obj.last_run_id is None:
            return "never run"
        url = reverse("admin:jobs_jobrun_change", args=[obj.last_run_id])
        return format_html(
            '<a href="{}">{}</a><br><small class="dc-muted">{}</small>',
            url,
            obj.last_run_status,
            admin_time.when(obj.last_run_started_at),
        )

    @admin.display(description="last duration")
    def last_duration(self, obj: Any) -> str:
        ms = obj.last_run_duration_ms
        return "-" if ms is None else f"{ms} ms"

    @admin.action(description="Run now (the job runs in this request)", permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[PeriodicTask]) -> None:
        for task in queryset:
            self.run_one(request, task)

    def run_one(self, request: HttpRequest, task: PeriodicTask) -> None:
        """Run `task`'s job now through the job runner (audited) and say how it went."""
        if task.task not in jobs.names():
            self.message_user(
                request, f"{task.name}: unknown job {task.task!r}, not run", messages.ERROR
            )
            return
        actor = audit.user_actor(request)
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


def _run_now(model_admin: JobScheduleAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    task = get_object_or_404(PeriodicTask, pk=object_id)
    if not model_admin.has_change_permission(request, task):
        raise PermissionDenied
    model_admin.run_one(request, task)
    opts = model_admin.opts
    if request.POST.get("from") == "change":
        return HttpResponseRedirect(
            reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[task.pk])
        )
    return HttpResponseRedirect(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))


def next_run_html(found: schedules.NextRun) -> SafeString | str:
    """'in 14 h', the exact time on hover in the console's format (and in the crontab's own
    zone when it has another); 'due now'; or why it will not run."""
    if found.at is None:
        return format_html('<span class="dc-muted">{}</span>', found.why)
    exact = admin_time.exact_time(found.at)
    if found.zone is not None and admin_time.exact_time(found.at, found.zone) != exact:
        exact = f"{exact} = {admin_time.exact_time(found.at, found.zone)}"
    if found.due:
        exact = f"{exact}: its slot passed, the scheduler fires it on its next tick"
    return format_html(
        '<time class="dc-next-run" datetime="{}" title="{}">{}</time>',
        found.at.isoformat(),
        exact,
        "due now" if found.due else admin_time.relative(found.at),
    )


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

    list_display = ["started_at", "job", "status", "trigger", "slot_time", "attempt"]
    list_display += ["rows_processed", "duration_ms", "short_error"]
    list_filter = (JobNameFilter, "status", "trigger", "started_at")
    ordering = ("-started_at",)
    fields = (
        "id", "job", "status", "trigger", "slot_time", "attempt", "rows_processed", "duration_ms",
        "started_at", "finished_at", "error",
    )  # fmt: skip
    readonly_fields = fields

    @admin.display(description="slot", ordering="slot")
    def slot_time(self, obj: JobRun) -> str:
        """The schedule slot in the console's format ('-' for runs by hand or HTTP)."""
        if not obj.slot:
            return "-"
        try:
            return admin_time.exact_time(dt.datetime.fromisoformat(obj.slot))
        except ValueError:
            return obj.slot  # not a time: shown as recorded

    @admin.display(description="error")
    def short_error(self, obj: JobRun) -> str:
        return obj.error if len(obj.error) <= 80 else obj.error[:79] + "…"
