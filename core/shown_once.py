"""Secrets shown once (a new API key, a webhook signing secret) by POST/redirect/GET.

The POST that creates the secret stashes it in the session, encrypted, under a random token and
redirects to `/admin/shown-once/<token>/`; that GET takes it out of the session and shows it. A
refresh or the back button finds nothing to show and can never re-submit the POST, and the URL
is useless in another session. Unread stashes expire after TTL_SECONDS.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers

if TYPE_CHECKING:
    from cryptography.fernet import Fernet  # imported by _fernet: the admin loads this module

SESSION_KEY = "core.shown_once"
TTL_SECONDS = 600
TEMPLATE = "admin/shown_once.html"


@dataclass
class ShownOnce:
    """What the page says: a title, a few sentences, the (label, secret) pairs, where to go next."""

    title: str
    intro: list[str]
    items: list[tuple[str, str]]
    back_url: str
    back_label: str = "Done"
    notes: list[str] = field(default_factory=list)


def stash(request: HttpRequest, page: ShownOnce) -> HttpResponseRedirect:
    """Keep the page in the session (encrypted) and redirect to the view that shows it once."""
    token = secrets.token_urlsafe(16)
    sealed = _fernet().encrypt(json.dumps(asdict(page)).encode()).decode()
    stashed = dict(request.session.get(SESSION_KEY, {}))
    stashed[token] = sealed
    request.session[SESSION_KEY] = stashed
    return HttpResponseRedirect(reverse("admin-shown-once", args=[token]))


def shown_once_view(request: HttpRequest, token: str) -> HttpResponse:
    """Show a stashed page and forget it; afterwards (refresh, back, another session) a 410."""
    stashed = dict(request.session.get(SESSION_KEY, {}))
    sealed = stashed.pop(token, None)
    request.session[SESSION_KEY] = stashed
    page = _open(sealed)
    context = {
        **admin.site.each_context(request),
        "title": page.title if page else "Already shown",
        "page": page,
    }
    response = TemplateResponse(request, TEMPLATE, context, status=200 if page else 410)
    add_never_cache_headers(response)
    return response


def _open(sealed: str | None) -> ShownOnce | None:
    if sealed is None:
        return None
    from cryptography.fernet import InvalidToken

    try:
        data = json.loads(_fernet().decrypt(sealed.encode(), ttl=TTL_SECONDS))
    except InvalidToken:
        return None
    data["items"] = [tuple(item) for item in data["items"]]
    return ShownOnce(**data)


def _fernet() -> Fernet:
    from cryptography.fernet import Fernet

    # Its own key derived from SECRET_KEY: the session store (a table) never holds the secret
    # in clear, even for the minutes between the redirect and the page.
    digest = hashlib.sha256(f"deskcomm.shown-once:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))
