"""Content negotiation with a short cut for what API clients send."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer

# What clients send when they want JSON, or anything (None: no Accept header): JSON at once.
PLAIN_ACCEPTS = frozenset({None, "*/*", "application/json"})


class JsonFirstNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, but no Accept header, `*/*` or `application/json` picks the JSON
    renderer without parsing the header into media types and matching them (5% of the Python
    time of an API emit under 32 clients, py-spy `--gil`). Anything else (a format suffix or
    `?format=`, parameters, a list, another type, an empty header) goes through DRF's
    negotiation, so a client that accepts no JSON still gets 406."""

    def select_renderer(
        self, request: Any, renderers: Sequence[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        accept = request.META.get("HTTP_ACCEPT")
        accept = accept.strip() if accept is not None else None  # "" (sent empty) is no JSON
        if accept in PLAIN_ACCEPTS and not format_suffix and not self._format_asked(request):
            for renderer in renderers:
                if renderer.media_type == "application/json":
                    return renderer, renderer.media_type
        return super().select_renderer(request, renderers, format_suffix)

    def _format_asked(self, request: Any) -> bool:
        return bool(self.settings.URL_FORMAT_OVERRIDE) and (
            self.settings.URL_FORMAT_OVERRIDE in request.query_params
        )
