"""Which reads go to the replica: only those a view marked, and never inside a write.

A view opts in with `@replica_view` (GET and HEAD only): its reads, and its template's, may be
served by the replica while the lag guard allows it. Everything else reads the primary: writes
(the router sends every write there), reads inside a transaction on the primary (a read that
feeds a write must see the latest row), authentication and permissions (a fresh login, API key
or grant works at once), and every request of an operator who has just changed something
(`PrimaryAfterWriteMiddleware`: read-your-writes). Raw SQL that the marked pages run takes its
connection from `read_connection()`. The replica's session gets the primary's row-level security
scope before its first read (`core.rls.follow_scope`), so the tenant wall holds there too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from django.conf import settings
from django.db import OperationalError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model
from django.template.response import TemplateResponse

from core import rls
from core.metrics import REPLICA_REQUESTS
from core.replica.conf import ALIAS, PRIMARY, configured, replica_settings
from core.replica.lag import guard

View = TypeVar("View", bound=Callable[..., Any])

READ_METHODS = frozenset({"GET", "HEAD"})
# Always the primary: sessions, users, groups and permissions, content types, admin log, API keys
# (the key lookup also scopes the primary's session to the key's tenant).
PRIMARY_ONLY_APPS = frozenset({"admin", "auth", "contenttypes", "sessions"})
PRIMARY_ONLY_MODELS = frozenset({"core.apikey"})
# Read-your-writes: a signed, timestamped cookie set by a write; its age is checked on read.
PIN_COOKIE = "deskcomm_primary"
PIN_SALT = "core.replica.pin"

_replica_allowed: ContextVar[bool] = ContextVar("deskcomm_replica_allowed", default=False)


@contextmanager
def replica_reads() -> Iterator[bool]:
    """Reads in this block may use the replica (configured, not lagging); yields whether so."""
    token = _replica_allowed.set(configured() and guard.usable())
    try:
        yield _replica_allowed.get()
    finally:
        _replica_allowed.reset(token)


def read_alias(model: type[Model] | None = None) -> str:
    """The alias that serves a read of `model` (or raw SQL) here and now."""
    if not _replica_allowed.get() or _primary_only(model):
        return PRIMARY
    if connections[PRIMARY].in_atomic_block:
        return PRIMARY
    rls.follow_scope(source=PRIMARY, target=ALIAS)
    return ALIAS


def read_connection() -> BaseDatabaseWrapper:
    """The connection raw-SQL reads should use (the replica only inside a marked view)."""
    return connections[read_alias()]


def _primary_only(model: type[Model] | None) -> bool:
    if model is None:
        return False
    meta = model._meta
    return meta.app_label in PRIMARY_ONLY_APPS or meta.label_lower in PRIMARY_ONLY_MODELS


def replica_view(view: View) -> View:
    """Let a read-only view (function or method) read the replica for GET and HEAD requests.

    A TemplateResponse is rendered inside, so its template's queries count too (a DRF Response
    holds data its serializer has already read). A view the replica fails under runs again on
    the primary, and the replica is not used again until the next measurement says so.
    """

    @functools.wraps(view)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        request = args[0] if hasattr(args[0], "method") else args[1]
        if request.method not in READ_METHODS or not configured():
            return view(*args, **kwargs)
        if pinned(request):
            REPLICA_REQUESTS.labels("pinned").inc()
            return view(*args, **kwargs)
        with replica_reads() as allowed:
            REPLICA_REQUESTS.labels("replica" if allowed else "fallback").inc()
            try:
                return _rendered(view(*args, **kwargs))
            except OperationalError as error:
                if not (allowed and connections[ALIAS].errors_occurred):
                    raise
                guard.replica_failed(error)
        # The replica failed under this request (it went down, or a recovery conflict cancelled
        # the query): the view only reads, so it runs again on the primary.
        REPLICA_REQUESTS.labels("fallback").inc()
        return _rendered(view(*args, **kwargs))

    return wrapper  # type: ignore[return-value]


def _rendered(response: Any) -> Any:
    if isinstance(response, TemplateResponse) and not response.is_rendered:
        response.render()  # its template reads querysets lazily: inside the marked block
    return response


def pinned(request: Any) -> bool:
    """Whether this browser wrote something less than PRIMARY_AFTER_WRITE_SECONDS ago."""
    window = replica_settings.PRIMARY_AFTER_WRITE_SECONDS
    mark = request.get_signed_cookie(PIN_COOKIE, default=None, salt=PIN_SALT, max_age=window)
    return mark is not None


class PrimaryAfterWriteMiddleware:
    """After a successful write request, the same browser reads the primary for a while."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        response = self.get_response(request)
        if request.method not in READ_METHODS and response.status_code < 400 and configured():
            response.set_signed_cookie(
                PIN_COOKIE,
                "1",
                salt=PIN_SALT,
                max_age=math.ceil(replica_settings.PRIMARY_AFTER_WRITE_SECONDS),
                secure=settings.SESSION_COOKIE_SECURE,
                httponly=True,
                samesite="Lax",
            )
        return response


class ReplicaRouter:
    """DATABASE_ROUTERS entry when DATABASE_REPLICA_URL is set: writes and migrations on the
    primary only; reads where `read_alias` says."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str:
        return read_alias(model)

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        return PRIMARY

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool:
        return True  # the replica is a copy of the primary: the same rows

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool:
        return db == PRIMARY
