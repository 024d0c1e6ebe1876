"""dev/pg_roles.py: the embedded server's roles are the ones the product expects, and each
process `python3 -m dev run` starts connects as the role meant for it."""

from __future__ import annotations

import pytest

from core import db_roles
from dev import pg_roles
from dev.product import PROCESSES, SETUP_STEPS


def test_the_role_names_are_the_products() -> None:
    assert pg_roles.PLATFORM_GROUP == db_roles.PLATFORM_GROUP
    assert pg_roles.APP_GROUP == db_roles.APP_GROUP
    assert {
        db_roles.OWNER: pg_roles.APP_ROLE,
        db_roles.WORKER: pg_roles.WORKER_ROLE,
        db_roles.WEB: pg_roles.WEB_ROLE,
    } == db_roles.DEFAULT_LOGIN_ROLES


@pytest.mark.parametrize("name", sorted(PROCESSES))
def test_each_run_process_connects_as_its_role(name: str) -> None:
    expected = db_roles.WEB if name == "web" else db_roles.WORKER
    assert db_roles.process_role(PROCESSES[name].argv, {}) == expected


def test_the_setup_steps_migrate_as_the_owner_and_seed_as_the_worker() -> None:
    roles = [db_roles.process_role(["manage.py", *step], {}) for step in SETUP_STEPS]
    assert roles == [db_roles.OWNER, db_roles.WORKER]
