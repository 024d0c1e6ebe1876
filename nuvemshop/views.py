"""HTTP entry points: the store webhook receiver and the admin's OAuth install (connect, callback).

Thin: parse, call one service, answer. The receiver writes rows and events only; the callback's
code exchange is the one request-time HTTP call (the code expires in 30 seconds).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from core import rls
from core.admin_scope import organizations_of, visible_organizations
from core.audit import user_actor
from core.models import Organization
from nuvemshop import oauth, receiver, services
from nuvemshop.conf import LGPD_WEBHOOK_EVENTS, STORE_WEBHOOK_EVENTS
from nuvemshop.metrics import WEBHOOKS

logger = logging.getLogger(__name__)

KNOWN_EVENTS = frozenset(STORE_WEBHOOK_EVENTS) | frozenset(LGPD_WEBHOOK_EVENTS)


@csrf_exempt  # signed by the shop (x-linkedstore-hmac-sha256), no session
@require_POST
def webhook_receive(request: HttpRequest, event: str) -> HttpResponse:
    """POST /api/webhooks/nuvemshop/{event}, e.g. .../order/paid (the event's own name)."""
    event = event.strip("/")
    if event not in KNOWN_EVENTS:
        return JsonResponse({"error": f"unknown event {event!r}"}, status=404)
    signature = request.headers.get(receiver.SIGNATURE_HEADER, "")
    try:
        accepted = receiver.webhook_accept(event=event, body=request.body, signature=signature)
    except receiver.BadSignature:
        WEBHOOKS.labels("bad_signature").inc()
        return JsonResponse({"error": "invalid signature"}, status=401)
    except receiver.BadPayload as error:
        WEBHOOKS.labels("bad_payload").inc()
        return JsonResponse({"error": str(error)}, status=400)
    # An unknown store (uninstalled long ago, another app's): 200 so the shop stops retrying.
    status = "duplicate" if accepted.duplicate else "accepted" if accepted.receipt_id else "ignored"
    WEBHOOKS.labels(status).inc()
    return JsonResponse({"status": status}, status=200)


CONNECT_PERMISSION = "nuvemshop.connect_store"


class ConnectForm(forms.Form):
    organization = forms.ModelChoiceField(queryset=Organization.objects.none())

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        super().__init__(data)
        # Only the organizations this admin user may see (core.admin_scope).
        field = self.fields["organization"]
        field.queryset = visible_organizations(Organization.objects.order_by("name"))  # type: ignore[attr-defined]


@staff_member_required
@permission_required(CONNECT_PERMISSION, raise_exception=True)
def connect(request: HttpRequest) -> HttpResponse:
    """Admin "Connect a store": pick the organization, then go to the shop's authorize page."""
    form = ConnectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        state = oauth.new_state()
        request.session[oauth.SESSION_STATE_KEY] = state
        request.session[oauth.SESSION_ORG_KEY] = str(form.cleaned_data["organization"].pk)
        return HttpResponseRedirect(oauth.authorize_url(state))
    context = {
        "form": form,
        "title": "Connect a Nuvemshop store",
        "has_permission": True,
        "site_header": "Deskcomm operations",
    }
    return render(request, "nuvemshop/connect.html", context)


@staff_member_required
@permission_required(CONNECT_PERMISSION, raise_exception=True)
def callback(request: HttpRequest) -> HttpResponse:
    """The app's redirection URL: check `state` against the session, exchange `code`."""
    expected = request.session.pop(oauth.SESSION_STATE_KEY, None)
    organization_id = _organization_id(request.session.pop(oauth.SESSION_ORG_KEY, None))
    if not oauth.state_matches(expected, request.GET.get("state")) or organization_id is None:
        return HttpResponse("Invalid or expired install state; start again.", status=400)
    allowed = organizations_of(request)
    if allowed is not None:
        if str(organization_id) not in {str(pk) for pk in allowed}:
            return HttpResponse("Not one of your organizations; start again.", status=403)
        rls.set_scope(organization_id=organization_id)  # the store's tenant
    code = request.GET.get("code", "")
    if not code:
        return HttpResponse("The shop sent no authorization code.", status=400)
    try:
        grant = oauth.code_exchange(code)
        store = services.store_connect(
            organization_id=organization_id, grant=grant, actor=user_actor(request)
        )
    except (oauth.OAuthError, ValueError) as error:
        logger.warning("nuvemshop install failed", extra={"error": str(error)})
        return HttpResponse(f"Install failed: {error}", status=400)
    messages.success(request, f"Store {store.ns_store_id} connected; the first sync is queued.")
    return HttpResponseRedirect(reverse("admin:nuvemshop_store_change", args=[store.pk]))


def _organization_id(value: object) -> uuid.UUID | None:
    """The organization the install was started for (the session keeps it as text)."""
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None
