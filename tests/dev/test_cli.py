"""dev/cli.py: what a local `run` sets for the product's processes."""

from __future__ import annotations

import pytest

from dev.cli import allow_loopback_webhooks


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
