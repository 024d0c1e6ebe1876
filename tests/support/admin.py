"""Admin users for tests: staff with exactly the permissions a test needs."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib.auth.models import Permission, User

from core.models import Organization, StaffOrganization

DLQ_OPERATOR = (
    "eventbus.view_deadletter",
    "eventbus.reprocess_deadletter",
    "eventbus.discard_deadletter",
)
# What an on-call engineer reads in the console: the DLQ (and its actions), events, deliveries,
# webhook subscriptions and their deliveries.
CONSOLE_READER = (
    *DLQ_OPERATOR,
    "eventbus.view_eventlog",
    "eventbus.view_delivery",
    "webhooks.view_subscription",
    "webhooks.view_webhookdelivery",
)
# A platform operator: sees every organization (core.admin_scope).
ALL_ORGANIZATIONS = "core.all_organizations"


def staff(
    username: str,
    *permissions: str,
    password: str = "pw-Console-1",
    organizations: Sequence[Organization] | None = None,
) -> User:
    """A staff (not superuser) user holding `permissions` ("app_label.codename").

    `organizations`: the organizations the user is bound to (organization-scoped staff); None
    (the default) makes a platform operator, who sees every organization, as the console tests
    that predate organization-scoped staff expect.
    """
    user = User.objects.create_user(username, password=password, is_staff=True)
    if organizations is None:
        permissions = (*permissions, ALL_ORGANIZATIONS)
    for organization in organizations or ():
        StaffOrganization.objects.create(user=user, organization=organization)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user
