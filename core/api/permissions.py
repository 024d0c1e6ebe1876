"""Scope checks: each API view maps HTTP methods to the scope they require."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission


class HasRequiredScope(BasePermission):
    """Authenticated, and the key holds `view.required_scopes[method]`.

    Unauthenticated requests fail here, and DRF turns that into 401 (the authentication class
    sets `WWW-Authenticate`). Methods the view does not map need no scope: DRF answers 405.
    """

    def has_permission(self, request: Any, view: Any) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return False
        method = "GET" if request.method == "HEAD" else request.method
        needed = getattr(view, "required_scopes", {}).get(method)
        if needed is not None and needed not in client.scopes:
            raise PermissionDenied(f"This API key lacks the scope {needed!r} needed here.")
        return True


class WriteImpliesRead(HasRequiredScope):
    """`HasRequiredScope`, where a read (GET, HEAD) is also allowed to a key holding the view's
    `write_scope` (a key that may change a resource may read it)."""

    def has_permission(self, request: Any, view: Any) -> bool:
        write_scope = getattr(view, "write_scope", None)
        scopes = getattr(request.user, "scopes", ())
        if request.method in ("GET", "HEAD") and write_scope and write_scope in scopes:
            return True
        return super().has_permission(request, view)
