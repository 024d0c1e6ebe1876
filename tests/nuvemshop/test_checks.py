"""The configuration's system checks: silent until the app id is set, then the secret and an
https webhook base are asked for."""

from __future__ import annotations

from typing import Any

from nuvemshop.checks import check_nuvemshop_settings


def ids(settings: Any, **knobs: object) -> list[str]:
    settings.NUVEMSHOP = knobs
    return [message.id for message in check_nuvemshop_settings()]


def test_an_unconfigured_integration_says_nothing(settings: Any) -> None:
    assert ids(settings) == []


def test_a_configured_app_needs_its_secret_and_an_https_base(settings: Any) -> None:
    assert ids(settings, APP_ID="123") == ["nuvemshop.W001", "nuvemshop.W002"]
    assert ids(settings, APP_ID="123", CLIENT_SECRET="s", WEBHOOK_BASE_URL="http://x") == [
        "nuvemshop.W002"
    ]
    assert ids(settings, APP_ID="1", CLIENT_SECRET="s", WEBHOOK_BASE_URL="https://x.example") == []
