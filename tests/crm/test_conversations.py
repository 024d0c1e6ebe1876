"""The conversation lifecycle services (crm.conversations): each change and its event commit
or roll back together; handoffs are routed round robin or to the owner; START opts back in."""

from __future__ import annotations

import pytest
from django.db import transaction

from core.models import AuditLog, Organization
from crm import conversations
from crm.conversation_models import HandoffRouting
from crm.models import Conversation
from tests.crm.support import agent, events
from tests.support.factories import ContactFactory, ConversationFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def conversation(org: Organization) -> Conversation:
    return ConversationFactory(organization=org)


def test_assign_resolve_reopen_emit_their_events(
    org: Organization, conversation: Conversation
) -> None:
    ana = agent(org, "ana")
    conversations.assign(conversation=conversation, user=ana, actor="user:boss")
    conversations.resolve(conversation=conversation, actor="user:ana", note="done")
    conversations.reopen(conversation=conversation, actor="user:ana", reason="came back")
    (assigned,) = events("conversation.assigned")
    assert assigned.payload == {
        "conversation_id": str(conversation.pk),
        "from_user_id": None,
        "to_user_id": ana.pk,
        "mode": "manual",
    }
    (resolved,) = events("conversation.resolved")
    assert resolved.payload["resolved_by"] == "user:ana"
    assert resolved.payload["duration_s"] >= 0
    (reopened,) = events("conversation.reopened")
    assert reopened.payload["reopened_by"] == "user:ana"
    conversation.refresh_from_db()
    assert (conversation.status, conversation.assigned_to_id) == ("open", ana.pk)


@pytest.mark.parametrize("step", ["assign", "resolve", "reopen"])
def test_each_change_rolls_back_with_its_event(
    org: Organization, conversation: Conversation, step: str
) -> None:
    ana = agent(org, "ana")
    if step == "reopen":
        conversations.resolve(conversation=conversation, actor="user:ana")
    with pytest.raises(RuntimeError), transaction.atomic():
        if step == "assign":
            conversations.assign(conversation=conversation, user=ana, actor="user:ana")
        elif step == "resolve":
            conversations.resolve(conversation=conversation, actor="user:ana")
        else:
            conversations.reopen(conversation=conversation, actor="user:ana")
        raise RuntimeError("the caller fails")
    event_type = {"assign": "assigned", "resolve": "resolved", "reopen": "reopened"}[step]
    assert events(f"conversation.{event_type}") == []
    conversation.refresh_from_db()
    assert conversation.assigned_to_id is None
    assert conversation.status == ("resolved" if step == "reopen" else "open")


def test_wrong_states_and_strangers_are_refused(
    org: Organization, org_b: Organization, conversation: Conversation
) -> None:
    with pytest.raises(conversations.ConversationStateError):
        conversations.reopen(conversation=conversation, actor="user:x")
    conversations.resolve(conversation=conversation, actor="user:x")
    with pytest.raises(conversations.ConversationStateError):
        conversations.resolve(conversation=conversation, actor="user:x")
    stranger = agent(org_b, "bruno")
    with pytest.raises(conversations.NotAnAgent):
        conversations.assign(conversation=conversation, user=stranger, actor="user:x")
    assert events("conversation.assigned") == []


def test_handoffs_go_round_robin_then_to_the_owner(org: Organization) -> None:
    ana, bia = agent(org, "ana"), agent(org, "bia")
    chosen = [
        conversations.handoff_assign(
            conversation=ConversationFactory(organization=org), actor="system:t"
        )
        for _ in range(3)
    ]
    assert chosen == [ana, bia, ana]
    assert {e.payload["mode"] for e in events("conversation.assigned")} == {"round_robin"}
    HandoffRouting.objects.filter(organization=org).update(owner=bia)
    assert (
        conversations.handoff_assign(
            conversation=ConversationFactory(organization=org), actor="system:t"
        )
        == bia
    )


def test_no_agent_leaves_the_handoff_unassigned(
    org: Organization, conversation: Conversation
) -> None:
    assert conversations.handoff_assign(conversation=conversation, actor="system:t") is None
    assert events("conversation.assigned") == []


def test_resume_bot_turns_it_back_on_audited(conversation: Conversation) -> None:
    Conversation.objects.filter(pk=conversation.pk).update(bot_active=False)
    assert conversations.resume_bot(conversation=conversation, actor="user:ana")
    assert Conversation.objects.get(pk=conversation.pk).bot_active
    assert AuditLog.objects.filter(action="conversation.bot_resumed").count() == 1
    assert not conversations.resume_bot(conversation=conversation, actor="user:ana")


def test_opt_in_lifts_a_stop_block_only(org: Organization) -> None:
    from django.utils import timezone

    stopped = ContactFactory(
        organization=org, blocked_at=timezone.now(), blocked_reason="stop_keyword"
    )
    manual = ContactFactory(organization=org, blocked_at=timezone.now(), blocked_reason="manual")
    assert conversations.opt_in(contact=stopped, keyword="start", message_id="m1")
    assert not conversations.opt_in(contact=manual, keyword="start", message_id="m2")
    stopped.refresh_from_db()
    manual.refresh_from_db()
    assert stopped.blocked_at is None and manual.blocked_at is not None
    (row,) = AuditLog.objects.filter(action="contact.opted_in")
    assert row.target_id == str(stopped.pk)
