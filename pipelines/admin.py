"""Admin: pipelines (definition edited as JSON text, kept as its author wrote it, validation
errors by node, hosts checked against the allowlist, an SVG of the graph), the host allowlist,
and executions with per-step status, duration and errors, plus a "re-run" action for failed
ones. Writes go through pipelines.services (validated, audited)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms.fields import InvalidJSONInput
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from core import audit
from core.admin_tables import ReplicaListAdmin
from pipelines import graph, services
from pipelines.definition import DefinitionError, parse
from pipelines.models import AllowedHost, Execution, Pipeline, Step

# What a new pipeline's editor starts with: the smallest valid definition, to grow.
SKELETON = """{
  "nodes": [
    {"id": "start", "type": "start"}
  ],
  "edges": []
}"""


class JSONText(InvalidJSONInput):
    """JSON text shown exactly as written (Django's JSONField shows such a value as is)."""


class DefinitionField(forms.JSONField):
    """The definition as JSON text: shown as its author wrote it (key order, layout), on the
    change page and again with the errors of a refused save; parsed in that order."""

    def bound_data(self, data: Any, initial: Any) -> Any:
        return None if data is None else JSONText(data)

    def has_changed(self, initial: Any, data: Any) -> bool:
        if isinstance(initial, str):
            try:
                initial = json.loads(initial)
            except ValueError:
                return True
        return bool(super().has_changed(initial, data))


class PipelineForm(forms.ModelForm):
    definition = DefinitionField(
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "style": "font-family:monospace"}),
        help_text='{"nodes": [...], "edges": [...]}, kept as you write it. Node types: start, '
        "http-request, set-status, emit-event, condition. An http-request's host must be on "
        "the organization's allowed hosts.",
    )

    class Meta:
        model = Pipeline
        fields = ["organization", "name", "trigger", "enabled", "definition"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        pipeline = self.instance
        self.source = ""
        if pipeline._state.adding:
            self.initial["definition"] = JSONText(SKELETON)
        else:
            text = pipeline.authored_source or services.definition_text(pipeline.definition)
            self.initial["definition"] = JSONText(text)

    def clean_trigger(self) -> str:
        try:
            return services.check_trigger(self.cleaned_data.get("trigger"))
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_definition(self) -> Any:
        definition = self.cleaned_data.get("definition")
        try:
            parse(definition)
        except DefinitionError as exc:
            self.problems = exc.problems
            raise forms.ValidationError([str(p) for p in exc.problems]) from None
        self.source = str(self.data.get(self.add_prefix("definition"), ""))
        return definition

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        organization = data.get("organization") or getattr(self.instance, "organization", None)
        if organization is not None and "definition" in data:
            for problem in services.unlisted_hosts(organization.pk, data["definition"]):
                self.add_error("definition", str(problem))
        if data.get("enabled") and organization is not None and data.get("trigger"):
            others = Pipeline.objects.filter(
                organization=organization, trigger=data["trigger"], enabled=True
            ).exclude(pk=self.instance.pk)
            if others.exists():
                self.add_error(
                    "enabled",
                    f"another enabled pipeline runs on {data['trigger']}: disable it first",
                )
        return data


@admin.register(Pipeline)
class PipelineAdmin(admin.ModelAdmin):
    form = PipelineForm
    list_display = ["name", "organization", "trigger", "enabled", "updated_at"]
    list_filter = ["enabled", "trigger", "organization"]
    search_fields = ["name", "trigger"]
    readonly_fields = ["graph", "recent_executions", "created_at", "updated_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = list(self.readonly_fields)
        return [*fields, "organization"] if obj is not None else fields

    @admin.display(description="graph")
    def graph(self, obj: Pipeline) -> SafeString:
        return graph.render_svg(obj.authored_definition or {})

    @admin.display(description="recent executions")
    def recent_executions(self, obj: Pipeline) -> SafeString:
        if obj.pk is None:
            return format_html("{}", "—")
        rows = obj.executions.order_by("-started_at")[:10]
        return format_html_join(
            "",
            '<div><a href="../../execution/{}/change/">{}</a> {} · {} attempt(s) {}</div>',
            ((e.pk, e.started_at, e.status, e.attempts, e.error[:120]) for e in rows),
        ) or format_html("{}", "none yet")

    def save_model(self, request: HttpRequest, obj: Pipeline, form: Any, change: bool) -> None:
        data = form.cleaned_data
        actor = audit.user_actor(request)
        if change:
            changes = {k: data[k] for k in ("name", "trigger", "enabled", "definition")}
            services.pipeline_update(obj, actor=actor, definition_source=form.source, **changes)
        else:
            created = services.pipeline_create(
                organization=data["organization"],
                name=data["name"],
                trigger=data["trigger"],
                definition=data["definition"],
                enabled=data["enabled"],
                actor=actor,
                definition_source=form.source,
            )
            obj.pk = created.pk


@admin.register(AllowedHost)
class AllowedHostAdmin(admin.ModelAdmin):
    list_display = ["host", "organization", "note", "created_at"]
    list_filter = ["organization"]
    search_fields = ["host"]

    def save_model(self, request: HttpRequest, obj: AllowedHost, form: Any, change: bool) -> None:
        obj.host = obj.host.strip().lower()
        super().save_model(request, obj, form, change)


class StepInline(admin.TabularInline):
    model = Step
    extra = 0
    can_delete = False
    fields = ("node_id", "node_type", "status", "attempts", "duration", "error", "io")
    readonly_fields = fields
    ordering = ["position"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="duration")
    def duration(self, step: Step) -> str:
        return f"{step.duration_ms} ms" if step.duration_ms is not None else "—"

    @admin.display(description="input / output")
    def io(self, step: Step) -> SafeString:
        return format_html(
            '<details><summary>show</summary><pre style="white-space:pre-wrap;max-width:560px">'
            "in: {}\nout: {}</pre></details>",
            step.input_excerpt,
            step.output_excerpt,
        )


@admin.register(Execution)
class ExecutionAdmin(ReplicaListAdmin):
    list_display = ["started_at", "pipeline", "trigger", "status", "attempts", "failed_node"]
    list_filter = ["status", "trigger", "organization"]
    search_fields = ["=id", "=event_id", "=order_id"]
    inlines = [StepInline]
    actions = ["rerun"]
    fields = (
        "pipeline",
        "trigger",
        "status",
        "attempts",
        "event_id",
        "order_id",
        "failed_node",
        "error",
        "started_at",
        "finished_at",
        "graph",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> Any:
        """Read-only: no save buttons, titled "View" (the change permission only gates the
        re-run action)."""
        read_only = {
            "show_save": False,
            "show_save_and_continue": False,
            "title": f"View {self.opts.verbose_name}",
        }
        return super().change_view(
            request, object_id, form_url, {**(extra_context or {}), **read_only}
        )

    @admin.display(description="graph (step status)")
    def graph(self, obj: Execution) -> SafeString:
        statuses = {s.node_id: s.status for s in obj.steps.all()}
        return graph.render_svg(obj.pipeline.definition or {}, statuses)

    @admin.action(description="Re-run the selected failed executions", permissions=["change"])
    def rerun(self, request: HttpRequest, queryset: QuerySet[Execution]) -> None:
        actor = audit.user_actor(request)
        for execution in queryset.select_related("pipeline"):
            try:
                result = services.execution_rerun(execution, actor=actor)
            except ValueError as exc:
                messages.warning(request, f"{execution.pk}: {exc}")
                continue
            level = messages.SUCCESS if result.status == "SUCCEEDED" else messages.ERROR
            detail = f": {result.error}" if result.error else ""
            messages.add_message(request, level, f"{execution.pk} re-run: {result.status}{detail}")
