"""`/`: a small page that says what this service is and links to the admin, the API docs and
the health probe (the admin's "View site" goes here), instead of a 404; and `/favicon.ico`,
which browsers ask for on every page."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET

FAVICON = Path(__file__).resolve().parent / "favicon.ico"


@require_GET
def landing(request: HttpRequest) -> HttpResponse:
    return render(request, "landing.html")


@cache
def _favicon() -> bytes:
    return FAVICON.read_bytes()


@require_GET
@cache_control(public=True, max_age=86400)
def favicon(request: HttpRequest) -> HttpResponse:
    """The site's icon (32 px), for the admin, the API docs and the landing page alike."""
    return HttpResponse(_favicon(), content_type="image/x-icon")
