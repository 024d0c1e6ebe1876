"""Admin users for tests: staff with exactly the permissions a test needs."""

from __future__ import annotations

from django.contrib.auth.models import Permission, User

DLQ_OPERATOR = (
    "eventbus.view_deadletter",
    "eventbus.reprocess_deadletter",
    "eventbus.discard_deadletter",
)


def staff(username: str, *permissions: str, password: str = "pw-Console-1") -> User:
    """A staff (not superuser) user holding `permissions` ("app_label.codename")."""
    user = User.objects.create_user(username, password=password, is_staff=True)
    for permission in permissions:
        app_label, codename = permission.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user
