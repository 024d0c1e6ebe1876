"""django.contrib.admin with the organization-scoped site (core.admin_scope). Its own module:
an AppConfig imported into core.apps would make two default configs there."""

from __future__ import annotations

from django.contrib.admin.apps import AdminConfig


class DeskcommAdminConfig(AdminConfig):
    default_site = "core.admin_scope.DeskcommAdminSite"
