"""One actor format in the audit log: `user:<username>` for whoever acts in the admin (DLQ,
webhooks, LGPD, jobs), `api_key:<prefix>` for API clients, `system:<name>` for the platform."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from core import audit
from core.models import AuditLog, Organization
from tests.support.dlq import webhook_dead_letter

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(User.objects.create_superuser("maria", password="pw-not-used"))
    return client


def test_admin_actions_in_every_app_are_audited_as_user(
    admin_client: Client, org: Organization
) -> None:
    subscription, dead = webhook_dead_letter(org, enabled=True)
    admin_client.post(
        "/admin/webhooks/subscription/",
        {"action": "disable", "index": "0", "_selected_action": [subscription.pk]},
    )
    admin_client.post(
        "/admin/eventbus/deadletter/",
        {"action": "reprocess_selected", "index": "0", "_selected_action": [dead.pk]},
    )
    admin_client.post(
        "/admin/eventbus/deadletter/",
        {
            "action": "reprocess_selected",
            "index": "0",
            "_selected_action": [dead.pk],
            "disabled_choice": "enable",
        },
    )
    actors = dict(AuditLog.objects.values_list("action", "actor"))
    assert actors["webhook.subscription_disable"] == "user:maria"
    assert actors["webhook.subscription_enable"] == "user:maria"
    assert actors["delivery.reprocess"] == "user:maria"
    assert {actor.split(":")[0] for actor in actors.values()} == {"user"}


def test_the_helpers_name_users_and_systems() -> None:
    class Request:
        user = User(username="ana")

    assert audit.user_actor(Request()) == "user:ana"
    assert audit.system_actor("lgpd-export") == "system:lgpd-export"
