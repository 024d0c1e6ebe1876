"""The admin's "Job queues" page (it replaces django_dramatiq's Tasks, which stays empty on the
Postgres broker): one row per queue with what waits, is delayed, runs and failed."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from jobs import queues

PERMISSION = "jobs.view_jobrun"


def job_queues_view(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm(PERMISSION):
        raise PermissionDenied
    figures = queues.queue_figures()
    context = {
        **admin.site.each_context(request),
        "title": "Job queues",
        "figures": figures,
        "broker": settings.DRAMATIQ_BROKER["BROKER"],
        "now": timezone.now(),
    }
    return TemplateResponse(request, "admin/jobs/queues.html", context)
