"""`/`: a small page that says what this service is and links to the admin, the API docs and
the health probe (the admin's "View site" goes here), instead of a 404."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


@require_GET
def landing(request: HttpRequest) -> HttpResponse:
    return render(request, "landing.html")
