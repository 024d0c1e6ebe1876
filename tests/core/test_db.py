"""core.db.drop_database: a scratch database goes, whatever still uses it."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from core.db import drop_database
from tests.support.db import database_url


@pytest.fixture
def admin(db: None) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        yield conn


def scratch(admin: psycopg.Connection[tuple[object, ...]], suffix: str) -> tuple[str, str]:
    name = f"{connection.settings_dict['NAME']}_{suffix}"
    drop_database(admin, name)
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return name, database_url().rsplit("/", 1)[0] + f"/{name}"


def exists(admin: psycopg.Connection[tuple[object, ...]], name: str) -> bool:
    return (
        admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        is not None
    )


def test_an_unused_database_is_dropped_and_a_missing_one_is_no_error(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    name, _ = scratch(admin, "drop_unused")
    drop_database(admin, name)
    assert not exists(admin, name)
    drop_database(admin, name)  # already gone: nothing to do


def test_a_database_still_in_use_is_dropped_and_its_sessions_ended(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    name, url = scratch(admin, "drop_in_use")
    with psycopg.connect(url, autocommit=True) as lingering:
        drop_database(admin, name)
        assert not exists(admin, name)
        with pytest.raises(psycopg.OperationalError):
            lingering.execute("SELECT 1")
