"""dev/cli.py: what a local `run` sets for the product's processes."""

from __future__ import annotations

import pytest

from dev.cli import allow_loopback_webhooks, mock_ai_by_default


def test_a_local_run_allows_loopback_webhook_targets_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env: dict[str, str] = {}
    allow_loopback_webhooks(env)
    assert env["WEBHOOKS_ALLOW_PRIVATE_TARGETS"] == "true"
    assert "WEBHOOKS_ALLOW_PRIVATE_TARGETS=true" in capsys.readouterr().err


def test_an_explicit_setting_is_kept_without_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "false"}
    allow_loopback_webhooks(env)
    assert env == {"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "false"}
    assert capsys.readouterr().err == ""


def test_run_turns_the_ai_fixtures_on_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    env: dict[str, str] = {}
    mock_ai_by_default(env)
    assert env["MOCK_AI"] == "true"
    assert "MOCK_AI=true" in capsys.readouterr().err


@pytest.mark.parametrize("given", [{"MOCK_AI": "false"}, {"AI_API_KEY": "sk-real"}])
def test_run_keeps_a_configured_model(given: dict[str, str]) -> None:
    env = dict(given)
    mock_ai_by_default(env)
    assert env == given
