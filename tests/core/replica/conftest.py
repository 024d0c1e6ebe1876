"""The streaming pair (a private primary and its hot standby), started once per test session
by the first test that needs it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.streaming import StreamingPair, serving, start_pair


@pytest.fixture(scope="session")
def streaming_pair(django_db_setup: None, django_db_blocker: Any) -> Iterator[StreamingPair]:
    with django_db_blocker.unblock():
        pair = start_pair()
    yield pair
    pair.close()


@pytest.fixture
def replicated(
    streaming_pair: StreamingPair, django_db_blocker: Any, settings: Any
) -> Iterator[StreamingPair]:
    """Django on the pair (default: its primary, replica: its standby), replay running; a
    generous lag limit and a fresh measurement on every request unless a test sets others."""
    settings.DATABASE_REPLICA = {"MAX_LAG": 60.0, "CHECK_INTERVAL": 0.0}
    with django_db_blocker.unblock(), serving(streaming_pair):
        try:
            yield streaming_pair
        finally:
            streaming_pair.resume_replay()
