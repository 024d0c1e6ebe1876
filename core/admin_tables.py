"""Changelists on big tables: no full COUNT(*), only filters the indexes serve.

`CappedPaginator` counts at most the rows needed for the pages around the current one (a LIMIT
inside the COUNT), so page 1 of a million-row table costs what page 1 of a small one costs; the
pagination template says "more than N" when the cap is reached. `LargeTableAdmin` also turns off
the unfiltered total count and refuses query-string lookups that no declared filter handles (a
free `?payload__icontains=` would scan the table); every list of the site answers such a lookup
with `unknown_filter_response` (core.admin_scope.OrganizationScopedAdmin).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from django.contrib import admin
from django.contrib.admin.filters import SimpleListFilter
from django.contrib.admin.views.main import PAGE_VAR
from django.core.exceptions import SuspiciousOperation
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.functional import cached_property

from core.replica.routing import replica_view

logger = logging.getLogger(__name__)

PAGES_AHEAD = 4


class CappedPaginator(Paginator):
    """A paginator whose count stops at `cap` (enough for a few pages ahead)."""

    def __init__(self, object_list: QuerySet[Any], per_page: int, *, cap: int) -> None:
        super().__init__(object_list, per_page)
        self.queryset = object_list
        self.cap = cap

    @cached_property
    def count(self) -> int:
        # COUNT(*) over a LIMIT, in the list's own order: the same index walk as the page, so
        # the cost is bounded by the cap, never by the table (or by dead tuples at its start).
        return self.queryset[: self.cap].count()

    @property
    def is_capped(self) -> bool:
        """True when there are at least `cap` rows: the count is a lower bound."""
        return self.count >= self.cap


class LargeTableAdmin(admin.ModelAdmin):
    """ModelAdmin base for tables too big to count: capped pagination, declared filters only."""

    show_full_result_count = False
    list_per_page = 50
    show_facets = admin.ShowFacets.NEVER  # facets count every choice over the table

    def get_paginator(
        self,
        request: HttpRequest,
        queryset: QuerySet[Any],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
    ) -> CappedPaginator:
        page = _page_number(request)
        return CappedPaginator(queryset, per_page, cap=(page + PAGES_AHEAD) * per_page + 1)

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        return lookup.split("__", 1)[0] in self.filter_parameters(request)

    def filter_parameters(self, request: HttpRequest | None) -> set[str]:
        """Query-string parameters the declared filters consume (everything else is refused)."""
        names: set[str] = set()
        filters = self.get_list_filter(request) if request is not None else self.list_filter
        for item in filters:
            if isinstance(item, type) and issubclass(item, SimpleListFilter):
                names.add(str(item.parameter_name))
            elif isinstance(item, list | tuple):
                names.add(str(item[0]))
            else:
                names.add(str(item))
        return names


class ReadOnlyMixin:
    """Logs and history are written by services only: viewing is all the admin may do."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReplicaListAdmin(admin.ModelAdmin):
    """A log's changelist, shown (GET) from the read replica when there is one (core.replica);
    its actions are POSTs, which read and write the primary."""

    @replica_view
    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        return super().changelist_view(request, extra_context)


class ReadOnlyAdmin(ReadOnlyMixin, ReplicaListAdmin, LargeTableAdmin):
    """A read-only changelist on a big table; its view-only pages may read the replica."""

    @replica_view
    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        return super().change_view(request, object_id, form_url, extra_context)


def _page_number(request: HttpRequest) -> int:
    try:
        return max(int(request.GET.get(PAGE_VAR, 1)), 1)
    except ValueError:
        return 1


# Django's words when a list's query string names a lookup no filter declares.
REFUSED_LOOKUP = re.compile(r"^Filtering by (?P<name>.+) not allowed$")


def unknown_filter_response(
    request: HttpRequest, model_admin: admin.ModelAdmin, refused: SuspiciousOperation
) -> TemplateResponse:
    """A short 400 page for a list asked to filter by a parameter it does not know (a typo such
    as `?cron=shown`), with a link to the list without it, and one log line: instead of the
    security logger's traceback and, under DEBUG, Django's technical page."""
    found = REFUSED_LOOKUP.match(str(refused))
    name = found.group("name") if found else ""
    kept = request.GET.copy()
    kept.pop(name, None)
    logger.warning("%s: refused the list filter %r (%s)", request.path, name, refused)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Unknown filter",
        "opts": model_admin.opts,
        "name": name,
        "values": request.GET.getlist(name),
        "without": f"{request.path}?{kept.urlencode()}" if kept else request.path,
    }
    response = TemplateResponse(request, "admin/unknown_filter.html", context, status=400)
    response._has_been_logged = True  # type: ignore[attr-defined]  # no "Bad Request" line too
    return response
