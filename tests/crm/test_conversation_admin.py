"""The conversation admin: the handoffs screen (open, assigned, waiting) with "resume bot", the
lifecycle actions through the services, and the agent's notifications; an organization-scoped
agent sees only their organization's rows."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from core.models import Organization
from crm.models import Conversation
from eventbus.store.models import EventLog
from tests.support.admin import staff
from tests.support.factories import ConversationFactory

pytestmark = pytest.mark.django_db

AGENT = (
    "crm.view_handoff",
    "crm.view_conversation",
    "crm.change_conversation",
    "crm.view_agentnotification",
    "crm.view_templatesuggestion",
)


def agent_client(org: Organization) -> tuple[Client, object]:
    user = staff("ana", *AGENT, organizations=[org])
    client = Client()
    client.force_login(user)
    return client, user


def test_the_handoffs_screen_lists_and_resumes(org: Organization, org_b: Organization) -> None:
    mine = ConversationFactory(organization=org, bot_active=False, last_inbound_at=timezone.now())
    ConversationFactory(organization=org)  # the bot answers it: not a handoff
    theirs = ConversationFactory(organization=org_b, bot_active=False)
    client, _ = agent_client(org)
    page = client.get("/admin/crm/handoff/").content.decode()
    assert str(mine.pk)[:8] in page and str(theirs.pk)[:8] not in page
    waiting = client.get("/admin/crm/handoff/?state=waiting").content.decode()
    assert str(mine.pk)[:8] in waiting
    assigned = client.get("/admin/crm/handoff/?state=assigned").content.decode()
    assert str(mine.pk)[:8] not in assigned
    answer = client.post(
        "/admin/crm/handoff/", {"action": "resume_bot", "_selected_action": [str(mine.pk)]}
    )
    assert answer.status_code == 302
    assert Conversation.objects.get(pk=mine.pk).bot_active
    assert Conversation.objects.get(pk=theirs.pk).bot_active is False


def test_the_conversation_actions_go_through_the_services(org: Organization) -> None:
    conversation = ConversationFactory(organization=org)
    client, user = agent_client(org)
    listing = client.get("/admin/crm/conversation/?status__exact=open").content.decode()
    assert str(conversation.pk)[:8] in listing
    for action in ("assign_to_me", "resolve"):
        client.post(
            "/admin/crm/conversation/",
            {"action": action, "_selected_action": [str(conversation.pk)]},
        )
    conversation.refresh_from_db()
    assert (conversation.status, conversation.assigned_to_id) == ("resolved", user.pk)  # type: ignore[attr-defined]
    resolved = EventLog.objects.get(event_type="conversation.resolved")
    assert resolved.payload["resolved_by"] == "user:ana"
    client.post(
        "/admin/crm/conversation/",
        {"action": "reopen", "_selected_action": [str(conversation.pk)]},
    )
    assert Conversation.objects.get(pk=conversation.pk).status == "open"


def test_a_reader_without_change_permission_gets_no_actions(org: Organization) -> None:
    conversation = ConversationFactory(organization=org, bot_active=False)
    user = staff("leitor", "crm.view_handoff", organizations=[org])
    client = Client()
    client.force_login(user)
    page = client.get("/admin/crm/handoff/").content.decode()
    assert "resume_bot" not in page
    client.post(
        "/admin/crm/handoff/", {"action": "resume_bot", "_selected_action": [str(conversation.pk)]}
    )
    assert Conversation.objects.get(pk=conversation.pk).bot_active is False


def test_a_suggested_template_is_sent_once_as_a_template(org: Organization) -> None:
    import uuid

    from crm.conversation_models import TemplateSuggestion
    from crm.models import Message

    conversation = ConversationFactory(organization=org)
    suggestion = TemplateSuggestion.objects.create(
        organization=org,
        conversation=conversation,
        reason="window_expired",
        template="Podemos continuar?",
        source_event_id=uuid.uuid4(),
    )
    client, _ = agent_client(org)
    for _ in range(2):
        client.post(
            "/admin/crm/templatesuggestion/",
            {"action": "send_template", "_selected_action": [str(suggestion.pk)]},
        )
    (sent,) = Message.objects.filter(conversation=conversation)
    assert (sent.body, sent.is_template, sent.status) == ("Podemos continuar?", True, "queued")
    suggestion.refresh_from_db()
    assert suggestion.used_at is not None
