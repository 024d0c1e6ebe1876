"""The AI admin: a knowledge article saved in the admin asks the indexer to index it; AI accounts
take an organization's own key without ever showing it; the key context rotates."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.test import Client

from ai.budget import local_today
from ai.models import AiAccount, KnowledgeArticle
from core.key_rotation import encryption_key_rotate
from core.models import Organization
from eventbus.store.models import EventLog

pytestmark = pytest.mark.django_db


def test_saving_an_article_in_the_admin_emits_article_changed(
    admin_client: Client, org: Organization
) -> None:
    response = admin_client.post(
        "/admin/ai/knowledgearticle/add/",
        {"organization": org.pk, "title": "Trocas", "body": "Até 30 dias.", "published": "on"},
    )
    assert response.status_code == 302, response.content[:2000]
    article = KnowledgeArticle.objects.get()
    (event,) = EventLog.objects.filter(event_type="knowledge.article_changed")
    assert event.payload == {"article_id": str(article.pk), "action": "saved"}
    assert event.organization_id == org.pk
    listing = admin_client.get("/admin/ai/knowledgearticle/")
    assert listing.status_code == 200 and b"Trocas" in listing.content


def test_an_account_s_own_key_is_stored_encrypted_and_never_shown(
    admin_client: Client, org: Organization
) -> None:
    response = admin_client.post(
        "/admin/ai/aiaccount/add/",
        {"organization": org.pk, "daily_budget_cents": 900, "new_api_key": "sk-own-admin-key"},
    )
    assert response.status_code == 302, response.content[:2000]
    account = AiAccount.objects.get()
    assert account.api_key == "sk-own-admin-key" and account.spent_day == local_today()
    page = admin_client.get(f"/admin/ai/aiaccount/{org.pk}/change/")
    assert page.status_code == 200 and b"sk-own-admin-key" not in page.content


def test_the_provider_key_context_rotates(org: Organization, settings: Any) -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, "ai_provider": [old]}
    account = AiAccount(organization=org, daily_budget_cents=1, spent_day=local_today())
    account.api_key = "sk-rotate-me"
    account.save()
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, "ai_provider": [new, old]}
    report = encryption_key_rotate(context="ai_provider", actor="test")
    assert (report.rewritten, report.remaining) == (1, 0)
    settings.ENCRYPTION_KEYS = {**settings.ENCRYPTION_KEYS, "ai_provider": [new]}
    assert AiAccount.objects.get(pk=org.pk).api_key == "sk-rotate-me"
