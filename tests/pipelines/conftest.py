"""Pipeline fixtures: a loopback receiver the organization may call."""

from __future__ import annotations

from typing import Any

import pytest

from core.models import Organization
from pipelines.models import AllowedHost
from tests.support.receiver import Receiver


@pytest.fixture
def loopback_allowed(settings: Any, org: Organization) -> None:
    """The organization may call 127.0.0.1, and private targets are allowed (as in tests)."""
    settings.PIPELINES = {**getattr(settings, "PIPELINES", {}), "ALLOW_PRIVATE_TARGETS": True}
    AllowedHost.objects.create(organization=org, host="127.0.0.1")


@pytest.fixture
def erp(receiver: Receiver) -> Receiver:
    return receiver
