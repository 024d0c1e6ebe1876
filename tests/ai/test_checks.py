"""MOCK_AI: a local run shows the whole flow with no key; production refuses to start with it.
And the vector extension check."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.test.utils import override_settings

from ai.checks import check_mock_ai, check_vector_extension
from crm.models import Conversation
from tests.support.ai_messages import ai_replies, receive
from tests.support.factories import ConversationFactory
from tests.support.processes import REPO, Drain, start_drain, subprocess_env


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        check=False,
        cwd=REPO,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_with_mock_ai_an_inbound_message_is_answered_without_any_key(
    processes: list[Drain],
) -> None:
    conversation: Conversation = ConversationFactory()
    inbound, _ = receive(conversation, "Oi, vocês abrem sábado?")
    drain = start_drain(
        "--once", "--consumer", "ai-response-worker", DEBUG="true", MOCK_AI="true", AI_API_KEY=""
    )
    processes.append(drain)
    assert drain.wait(timeout=180) == 0, drain.output()
    (reply,) = ai_replies(inbound)
    assert reply.body.startswith("[mock] Recebi sua mensagem: Oi, vocês abrem sábado?")


@pytest.mark.slow
@pytest.mark.parametrize("command", [["check"], ["drain_events", "--once"]])
def test_production_refuses_to_start_with_mock_ai(command: list[str]) -> None:
    result = manage(*command, DEBUG="false", MOCK_AI="true")
    assert result.returncode != 0
    assert "ai.E001" in result.stderr


def test_the_mock_check_is_quiet_in_development_and_without_the_mock() -> None:
    with override_settings(DEBUG=True, AI={"MOCK": True}):
        assert check_mock_ai() == []
    with override_settings(DEBUG=False, AI={"MOCK": False}):
        assert check_mock_ai() == []
    with override_settings(DEBUG=False, AI={"MOCK": True}):
        assert [m.id for m in check_mock_ai()] == ["ai.E001"]


@pytest.mark.django_db
def test_the_vector_extension_check_passes_on_the_embedded_server() -> None:
    assert check_vector_extension(databases=["default"]) == []
    assert check_vector_extension() == []  # only with --database
