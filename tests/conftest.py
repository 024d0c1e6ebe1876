"""Shared fixtures: organizations, the side-effect table, in-process and subprocess workers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection

import tests.support.consumers  # noqa: F401  (registers the test consumers and event types)
from core import rls
from core.models import Organization
from tests.support import flush
from tests.support.db import SIDE_EFFECT_TABLE_SQL, role_bypasses_rls
from tests.support.factories import OrganizationFactory
from tests.support.processes import Drain, Managed
from tests.support.receiver import Receiver

# The `browser` fixture (headless Chromium) for the admin browser tests; what lets the suite run
# in parallel worker processes, and its test databases (pytest-django's django_db_setup,
# overridden: migrated once, copied per worker; docs/testing.md).
pytest_plugins = ["tests.support.browser", "tests.support.parallel", "tests.support.template_db"]

# The test process is a platform process: it creates every tenant's rows freely. Tests of the
# tenant wall scope their session explicitly (rls.scoped), API requests scope themselves.
rls.bypass_process()


@pytest.fixture(scope="session", autouse=True)
def _close_broker_pool(django_db_setup: None) -> Iterator[None]:
    """Close the job broker's connection pool before the test database is dropped."""
    yield
    import dramatiq

    dramatiq.get_broker().close()


@pytest.fixture(scope="session", autouse=True)
def _flush_without_post_migrate() -> Iterator[None]:
    """A transactional test's flush puts back the rows post_migrate wrote the first time
    instead of sending post_migrate again (tests/support/flush.py)."""
    undo = flush.install()
    yield
    undo()


@pytest.fixture(autouse=True)
def _breaker_off(settings: Any) -> None:
    """The circuit breaker would pause the test consumers that fail on purpose: off, except in
    the tests of it (they override EVENTBUS themselves; subprocesses: tests.support.processes)."""
    settings.EVENTBUS = {**settings.EVENTBUS, "BREAKER_ENABLED": False}


@pytest.fixture(autouse=True)
def _admin_second_factor_off(settings: Any) -> None:
    """The admin's TOTP step (core.admin_otp) is on whenever DEBUG is off, as in tests: off
    here, explicitly, so the console tests log in with a password; tests/core/test_admin_login.py
    turns it on (and deskcomm.E012 keeps production from running without it)."""
    settings.ADMIN_OTP_REQUIRED = False


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    """Each test starts with an empty cache (the status charts keep final steps in it)."""
    yield
    cache.clear()


@pytest.fixture
def unhurried(settings: Any) -> None:
    """For the tests of a healthy answer: what is checked is that each dependency answers, not
    how fast (the timeouts have tests of their own): on a loaded machine a check of a reachable
    server has taken longer than the default 1 s."""
    settings.HEALTH = {**settings.HEALTH, "CHECK_TIMEOUT": 30.0, "BUDGET_SECONDS": 60.0}


@pytest.fixture
def org(db: None) -> Organization:
    return OrganizationFactory(name="Acme", slug="acme")


@pytest.fixture
def org_b(db: None) -> Organization:
    return OrganizationFactory(name="Beta", slug="beta")


@pytest.fixture
def side_effects(db: None) -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute(SIDE_EFFECT_TABLE_SQL)
        cursor.execute("TRUNCATE test_side_effect")
    yield


@pytest.fixture
def processes() -> Iterator[list[Drain]]:
    """Drain subprocesses a test started; whatever is still running at the end is killed."""
    started: list[Drain] = []
    yield started
    for process in started:
        process.close()


@pytest.fixture
def managed() -> Iterator[list[Managed]]:
    """Collects subprocesses started by a test and kills what is left at the end."""
    started: list[Managed] = []
    yield started
    for process in started:
        process.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A real HTTP server on 127.0.0.1 (an ephemeral port) recording requests and connections."""
    server = Receiver()
    yield server
    server.close()


@pytest.fixture
def enforced(db: None) -> None:
    """Row-level security applies to the test role (a superuser or BYPASSRLS role skips)."""
    if role_bypasses_rls():
        pytest.skip("DATABASE_URL connects as a superuser/BYPASSRLS role: RLS does not apply")
