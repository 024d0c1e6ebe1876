"""Organization-scoped staff: what each admin user may see, enforced by the database first.

- **Superusers** and staff holding `core.all_organizations` (platform operators) see every
  organization: their admin requests run with the row-level security bypass (core.rls), as
  every staff request did before.
- **Every other staff user** is bound to organizations (core.models.StaffOrganization) and works
  in one of them at a time, chosen at /admin/organization/ (the first by name until they
  choose). Their admin requests run with that organization's tenant scope: the same wall an API
  key gets, so a screen that forgets a filter (a changelist, a console page, raw SQL) still sees
  nothing of another tenant. A staff user bound to none sees no tenant row at all.

On top of the wall (defence in depth, and for what the wall does not cover: the organization
table itself, foreign key choices, list filters), every model admin registered on the site is
wrapped in `OrganizationScopedAdmin`, and the auth backend `ScopedModelBackend` refuses an
organization-scoped user every permission on a platform-wide model (one with no organization:
users, groups, workers, consumers, job runs and schedules), whatever their groups grant.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.exceptions import DisallowedModelAdminLookup
from django.contrib.auth.backends import ModelBackend
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from core import rls
from core.admin_tables import unknown_filter_response

ALL_ORGANIZATIONS = "core.all_organizations"
SESSION_KEY = "deskcomm_admin_organization"
# What the middleware leaves on the request: None for every organization, else the bound ones.
REQUEST_ORGANIZATIONS = "admin_organizations"
REQUEST_ACTIVE = "admin_organization"
# The same for code that has no request at hand (choices, charts): None outside a scoped request.
_visible: ContextVar[list[uuid.UUID] | None] = ContextVar("deskcomm_admin_visible", default=None)


def sees_all(user: Any) -> bool:
    """A superuser or a platform operator: every organization (the bypass)."""
    return bool(user.is_superuser or user.has_perm(ALL_ORGANIZATIONS))


def bound_organizations(user: Any) -> list[tuple[uuid.UUID, str]]:
    """(id, name) of the organizations `user` is bound to, by name. Reads under the bypass: the
    bindings are behind the tenant wall too."""
    from core.models import StaffOrganization

    with rls.scoped(bypass=True):
        rows = StaffOrganization.objects.filter(user=user).order_by("organization__name")
        return list(rows.values_list("organization_id", "organization__name"))


def organizations_of(request: HttpRequest) -> list[uuid.UUID] | None:
    """The ids the request's admin user may see; None for every organization."""
    bound = getattr(request, REQUEST_ORGANIZATIONS, None)
    return None if bound is None else [pk for pk, _ in bound]


def visible_organizations(queryset: QuerySet[Any]) -> QuerySet[Any]:
    """A queryset of organizations limited to those this admin request's user may see (the
    organization table has no tenant wall of its own: its names are not secrets the wall holds).
    Unchanged outside an organization-scoped admin request."""
    ids = _visible.get()
    return queryset if ids is None else queryset.filter(pk__in=ids)


def active_organization(request: HttpRequest) -> uuid.UUID | None:
    return getattr(request, REQUEST_ACTIVE, None)


def _choose(request: HttpRequest, bound: list[tuple[uuid.UUID, str]]) -> uuid.UUID | None:
    chosen = request.session.get(SESSION_KEY)
    for pk, _ in bound:
        if str(pk) == chosen:
            return pk
    return bound[0][0] if bound else None


class AdminScopeMiddleware:
    """Scopes each staff request under /admin/: the bypass for those who see every
    organization, else the tenant scope of the organization they work in (or nothing).
    Install it after AuthenticationMiddleware."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if not (request.path.startswith("/admin/") and getattr(user, "is_staff", False)):
            return self.get_response(request)
        token = None
        if sees_all(user):
            setattr(request, REQUEST_ORGANIZATIONS, None)
            rls.set_scope(bypass=True)
        else:
            bound = bound_organizations(user)
            active = _choose(request, bound)
            setattr(request, REQUEST_ORGANIZATIONS, bound)
            setattr(request, REQUEST_ACTIVE, active)
            token = _visible.set([pk for pk, _ in bound])
            rls.set_scope(organization_id=active)  # None: a closed scope, nothing visible
        try:
            return self.get_response(request)  # a TemplateResponse is rendered in there
        finally:
            if token is not None:
                _visible.reset(token)
            rls.leave_platform()  # the tenant scope itself ends with the request (core.rls)


def organization_path(model: type[models.Model]) -> str | None:
    """The lookup from `model` to its organization's id ("pk" for the organization itself),
    None for a platform-wide model."""
    from core.models import Organization

    if issubclass(model, Organization):
        return "pk"
    try:
        field = model._meta.get_field("organization")
    except Exception:  # FieldDoesNotExist
        return None
    return "organization_id" if field.is_relation else None


class ScopedModelBackend(ModelBackend):
    """Django's model backend, except that an organization-scoped staff user holds no
    permission on a platform-wide model (see the module docstring)."""

    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        if not super().has_perm(user_obj, perm, obj):
            return False
        if perm == ALL_ORGANIZATIONS or user_obj.is_superuser:
            return True
        model = _permission_model(perm)
        if model is None or organization_path(model) is not None:
            return True
        return super().has_perm(user_obj, ALL_ORGANIZATIONS)

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return any(
            self.has_perm(user_obj, perm)
            for perm in self.get_all_permissions(user_obj)
            if perm.startswith(f"{app_label}.")
        )


_perm_models: dict[str, type[models.Model] | None] = {}


def _permission_model(perm: str) -> type[models.Model] | None:
    """The model a permission ("app_label.codename") belongs to (cached per process)."""
    if perm not in _perm_models:
        from django.contrib.auth.models import Permission

        app_label, _, codename = perm.partition(".")
        found = (
            Permission.objects.filter(content_type__app_label=app_label, codename=codename)
            .select_related("content_type")
            .first()
        )
        _perm_models[perm] = found.content_type.model_class() if found else None
    return _perm_models[perm]


class OrganizationListFilter(admin.SimpleListFilter):
    """The organization filter, offering only the organizations the user may see."""

    title = "organization"
    parameter_name = "organization"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        from core.models import Organization

        rows = visible_organizations(Organization.objects.order_by("name"))
        return [(str(pk), name) for pk, name in rows.values_list("pk", "name")[:200]]

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        value = self.value()
        if not value:
            return queryset
        try:
            return queryset.filter(organization_id=uuid.UUID(value))
        except ValueError:
            return queryset.none()


class OrganizationScopedAdmin(admin.ModelAdmin):
    """Mixed into every registered model admin (DeskcommAdminSite.register): rows, foreign key
    choices and the organization filter limited to what the user may see."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return scope_queryset(request, super().get_queryset(request))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        try:
            return super().changelist_view(request, extra_context)
        except DisallowedModelAdminLookup as refused:  # a typo in the query string
            return unknown_filter_response(request, self, refused)

    def formfield_for_dbfield(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> forms.Field | None:
        if isinstance(db_field, models.URLField):
            kwargs.setdefault("assume_scheme", "https")  # Django 6's default, without its warning
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def formfield_for_foreignkey(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> forms.ModelChoiceField[Any] | None:
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        queryset = getattr(field, "queryset", None)
        if queryset is not None:
            field.queryset = scope_queryset(request, queryset)  # type: ignore[union-attr]
        return field

    def get_list_filter(self, request: HttpRequest) -> Any:
        return [
            OrganizationListFilter if entry == "organization" else entry
            for entry in super().get_list_filter(request)
        ]


def scope_queryset(request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
    """`queryset` limited to the organizations the request's admin user may see."""
    ids = organizations_of(request)
    if ids is None:
        return queryset
    path = organization_path(queryset.model)
    if path is None:
        return queryset.none()
    return queryset.filter(**{f"{path}__in": ids})


class DeskcommAdminSite(admin.AdminSite):
    """The admin site: every model admin organization-scoped, the active organization shown."""

    def register(self, model_or_iterable: Any, admin_class: Any = None, **options: Any) -> None:
        admin_class = admin_class or admin.ModelAdmin
        if not issubclass(admin_class, OrganizationScopedAdmin):
            admin_class = type(
                admin_class.__name__,
                (OrganizationScopedAdmin, admin_class),
                {"__module__": admin_class.__module__, "__doc__": admin_class.__doc__},
            )
        super().register(model_or_iterable, admin_class, **options)

    def each_context(self, request: HttpRequest) -> dict[str, Any]:
        context = super().each_context(request)
        context["admin_organizations"] = getattr(request, REQUEST_ORGANIZATIONS, None)
        context["admin_organization"] = active_organization(request)
        return context


class ChooseOrganizationForm(forms.Form):
    organization = forms.UUIDField()


def choose_organization_view(request: HttpRequest) -> HttpResponse:
    """/admin/organization/: the organizations this staff user works in; POST picks one."""
    bound = getattr(request, REQUEST_ORGANIZATIONS, None)
    if request.method == "POST":
        form = ChooseOrganizationForm(request.POST)
        allowed = {str(pk) for pk, _ in bound or []}
        if not form.is_valid() or str(form.cleaned_data["organization"]) not in allowed:
            return HttpResponse("Not one of your organizations.", status=400)
        request.session[SESSION_KEY] = str(form.cleaned_data["organization"])
        return HttpResponseRedirect("/admin/")
    context = {
        **admin.site.each_context(request),
        "title": "Organization",
        "organizations": bound,
        "active": active_organization(request),
    }
    return TemplateResponse(request, "admin/core/choose_organization.html", context)
