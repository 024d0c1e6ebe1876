"""Console pages for running the bus: the worker processes (quiet / stop a bus process,
audited, platform operators only), the consumers with their pause and circuit-breaker states
(pause / resume, audited, through eventbus.operations.services), and the replay of one consumer over
a time window (eventbus.history.replays: preview first, then replay, audited)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from core import admin_time, audit, workers
from core.admin_scope import sees_all
from core.models import Organization, WorkerProcess
from core.replica.routing import replica_view
from eventbus.history import replays
from eventbus.operations import selectors, services
from eventbus.store import consumer_labels
from eventbus.store.registry import registry

PAUSE_PERMISSION = "eventbus.pause_consumer"
REPLAY_PERMISSION = "eventbus.replay_consumer"
WORKER_CONTROL_PERMISSION = "core.change_workerprocess"
# The processes that obey quiet and stop: the bus's runner (eventbus/dispatch/runner.py) drives
# them.
CONTROLLABLE = ("drain_events", "deliver_webhooks")
# What each pump's number counts, for the concurrency column's explanation.
THREAD_MEANINGS = {
    "drain": "handler threads (--concurrency)",
    "relay": "outbox relay publisher",
    "webhooks": "requests in flight (--concurrency)",
}


@dataclass(frozen=True)
class WorkerLine:
    """One row of the workers page, ready to draw."""

    row: workers.WorkerRow
    threads: str  # "drain 2 + relay 1", "" when the process reports no split
    started: Any
    heartbeat: Any
    last_claim: Any
    asked: str  # "quiet asked by user:ops 12 s ago", "" when nothing was asked
    controllable: bool  # alive, a bus process, not asked to stop yet

    @property
    def process(self) -> Any:
        return self.row.process


@replica_view
def workers_view(request: HttpRequest) -> TemplateResponse:
    """Every registered process: alive, stale (missed heartbeats) or stopped; quiet / stop
    buttons for a platform operator holding the change permission."""
    _require(request, "core.view_workerprocess")
    rows = workers.workers()
    meanings = sorted({name for r in rows for name in r.process.threads})
    context = {
        **admin.site.each_context(request),
        "title": "Workers",
        "rows": [_worker_line(r) for r in rows],
        "alive": sum(1 for r in rows if r.state == "alive"),
        "stale": sum(1 for r in rows if r.state == "stale"),
        "heartbeat": workers.worker_settings.HEARTBEAT_SECONDS,
        "stale_after": workers.worker_settings.STALE_AFTER_BEATS,
        "can_control": _may_control(request),
        "thread_meanings": [(n, THREAD_MEANINGS[n]) for n in meanings if n in THREAD_MEANINGS],
    }
    return TemplateResponse(request, "admin/eventbus/workers.html", context)


def _worker_line(row: workers.WorkerRow) -> WorkerLine:
    p = row.process
    asked = ""
    if p.command and p.command_at:
        asked = f"{p.command} asked by {p.command_by} {admin_time.relative(p.command_at)}"
    return WorkerLine(
        row,
        " + ".join(f"{name} {count}" for name, count in p.threads.items()),
        admin_time.when(p.started_at),
        admin_time.when(p.heartbeat_at),
        admin_time.when(p.last_claim_at) if p.last_claim_at else "never",
        asked,
        row.state == "alive" and p.kind in CONTROLLABLE and p.command != "stop",
    )


def _may_control(request: HttpRequest) -> bool:
    """Platform operators only (every organization), with the change permission."""
    return sees_all(request.user) and request.user.has_perm(WORKER_CONTROL_PERMISSION)


@require_POST
def worker_action_view(request: HttpRequest, worker_id: str, action: str) -> HttpResponse:
    """POST quiet / stop for one live bus process (audited); back to the workers page."""
    if not _may_control(request):
        raise PermissionDenied
    process = WorkerProcess.objects.filter(pk=worker_id).first()
    if process is None or process.kind not in CONTROLLABLE:
        messages.error(request, f"{worker_id}: no such bus process ({', '.join(CONTROLLABLE)})")
        return HttpResponseRedirect(reverse("eventbus_ops:workers"))
    try:
        workers.ask(worker_id, action, actor=audit.user_actor(request))
    except workers.NotAsked as exc:
        messages.warning(request, str(exc))
    else:
        beat = f"{workers.worker_settings.HEARTBEAT_SECONDS:g} s"
        what = {
            "quiet": "claims nothing more (what it holds still runs)",
            "stop": "finishes what it runs and exits, as on SIGTERM",
        }[action]
        messages.success(
            request, f"Asked {process.kind} pid {process.pid} to {action}: it {what} within {beat}"
        )
    return HttpResponseRedirect(reverse("eventbus_ops:workers"))


@replica_view
def consumers_view(request: HttpRequest) -> TemplateResponse:
    """Each consumer's state (running, paused, breaker open / half-open), since when, why."""
    _require(request, "eventbus.view_consumerstate")
    lines = selectors.consumer_lines()
    labels = consumer_labels.labels({line.name for line in lines})  # subscriptions by name
    context = {
        **admin.site.each_context(request),
        "title": "Consumers",
        "lines": [(line, labels[line.name]) for line in lines],
        "can_pause": request.user.has_perm(PAUSE_PERMISSION),
        "can_replay": request.user.has_perm(REPLAY_PERMISSION),
    }
    return TemplateResponse(request, "admin/eventbus/consumers.html", context)


class ReplayForm(forms.Form):
    since = forms.DateTimeField(
        help_text="Events emitted at or after this time (your time zone)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = forms.DateTimeField(
        required=False,
        help_text="... and before this one (empty: now)",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    organization = forms.ModelChoiceField(
        Organization.objects.order_by("name"), required=False, empty_label="every organization"
    )
    event_type = forms.ChoiceField(required=False)
    reason = forms.CharField(
        max_length=2000,
        help_text="Why (kept in the audit log)",
        widget=forms.TextInput(attrs={"size": 60}),
    )

    def __init__(self, *args: Any, consumer: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        event_type = self.fields["event_type"]
        assert isinstance(event_type, forms.ChoiceField)
        events = registry.get(consumer).events
        event_type.choices = [("", "every type it consumes")] + [(e, e) for e in events]

    def window(self, consumer: str) -> replays.Window:
        data = self.cleaned_data
        organization = data.get("organization")
        return replays.window(
            consumer=consumer,
            since=data["since"],
            until=data.get("until"),
            organization_id=organization.pk if organization else None,
            event_type=data.get("event_type") or None,
        )


def consumer_replay_view(request: HttpRequest, consumer: str) -> HttpResponse:
    """GET the form; POST "preview" (a dry run: counts by status) or "replay" (queues, audits,
    back to the consumers page with the replay's id and counts)."""
    _require(request, REPLAY_PERMISSION)
    if registry.find(consumer) is None:
        messages.error(request, f"No registered consumer named {consumer!r}")
        return HttpResponseRedirect(reverse("eventbus_ops:consumers"))
    form = ReplayForm(request.POST or None, consumer=consumer)
    preview: replays.ReplayReport | None = None
    if request.method == "POST" and form.is_valid():
        dry = "replay" not in request.POST
        try:
            report = replays.replay(
                form.window(consumer),
                actor=audit.user_actor(request),
                reason=form.cleaned_data["reason"],
                dry_run=dry,
            )
        except replays.ReplayError as exc:
            form.add_error(None, str(exc))
        else:
            if dry:
                preview = report
            else:
                messages.success(
                    request,
                    f"Replay {report.replay_id} of {consumer}: {report.queued} deliveries "
                    f"queued, {report.left} left (pending, running or replayed already) of "
                    f"{report.matched} events in the window",
                )
                return HttpResponseRedirect(reverse("eventbus_ops:consumers"))
    context = {
        **admin.site.each_context(request),
        "title": f"Replay {consumer}",
        "consumer": consumer,
        "form": form,
        "preview": preview,
        "preview_rows": sorted(preview.by_status.items()) if preview else [],
    }
    return TemplateResponse(request, "admin/eventbus/consumer_replay.html", context)


@require_POST
def consumer_action_view(request: HttpRequest, consumer: str, action: str) -> HttpResponse:
    """POST pause / resume (with a reason) from the consumers page."""
    _require(request, PAUSE_PERMISSION)
    reason = request.POST.get("reason", "").strip()
    actor = audit.user_actor(request)
    try:
        changed = _act(action, consumer=consumer, actor=actor, reason=reason)
    except (ValueError, services.UnknownConsumerError) as exc:
        messages.error(request, str(exc))
    else:
        if changed:
            messages.success(request, f"{action.capitalize()}d {consumer}")
        else:
            messages.warning(request, f"{consumer}: nothing to {action} (already {action}d)")
    return HttpResponseRedirect(reverse("eventbus_ops:consumers"))


def _act(action: str, *, consumer: str, actor: str, reason: str) -> bool:
    if action == "pause":
        return services.consumer_pause(consumer=consumer, actor=actor, reason=reason)
    return services.consumer_resume(consumer=consumer, actor=actor, reason=reason)


def _require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied
