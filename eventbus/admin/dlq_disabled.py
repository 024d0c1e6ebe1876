"""Reprocessing into a switched-off consumer: the warning page and the "enable too" choice.

A dead letter of a disabled webhook subscription that is reprocessed dies again at once
(`SubscriptionDisabled`). Before that happens the operator is told which consumers are off and
picks: enable them and reprocess (each enable audited by its owner), reprocess anyway, or go back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest
from django.template.response import TemplateResponse

from core import audit
from eventbus.admin import selectors
from eventbus.store import consumer_labels
from eventbus.store.consumer_labels import ConsumerLabel

CHOICE = "disabled_choice"
ENABLE = "enable"
KEEP = "keep"
TEMPLATE = "admin/eventbus/deadletter/reprocess_disabled.html"


def disabled_among(delivery_ids: Sequence[int]) -> list[ConsumerLabel]:
    """The switched-off consumers of these deliveries."""
    return consumer_labels.disabled(selectors.consumers_of(delivery_ids))


def choice_of(request: HttpRequest) -> str | None:
    value = request.POST.get(CHOICE)
    return value if value in (ENABLE, KEEP) else None


def may_enable(request: HttpRequest, off: Sequence[ConsumerLabel]) -> bool:
    """Whether this user may switch every one of these consumers back on."""
    return all(request.user.has_perm(label.enable_permission) for label in off)


def enable_if_chosen(request: HttpRequest, choice: str | None, off: Sequence[ConsumerLabel]) -> int:
    """Enable the disabled consumers when the operator chose to and may; how many were."""
    if choice != ENABLE or not may_enable(request, off):
        return 0
    names = [label.name for label in off]
    return consumer_labels.enable(names, actor=audit.user_actor(request))


def warning_page(
    request: HttpRequest, context: dict[str, Any], ids: Sequence[int], off: list[ConsumerLabel]
) -> TemplateResponse:
    """The page that asks before reprocessing into disabled consumers (re-posts the action)."""
    page = {
        **context,
        "title": "Reprocess into a disabled consumer?",
        "ids": ids,
        "disabled": off,
        "may_enable": may_enable(request, off),
        "count": len(ids),
        "choice_name": CHOICE,
        "enable": ENABLE,
        "keep": KEEP,
    }
    return TemplateResponse(request, TEMPLATE, page)
