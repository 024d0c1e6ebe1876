"""Connections as the project's database roles (core.db_roles) for the tests of the wall.

python3 -m dev creates the roles without passwords on its server (trusted on 127.0.0.1); on
another server the tests take each role's credentials from DATABASE_WEB_URL and
DATABASE_WORKER_URL. A role the server does not have skips its tests (fails under CI=true).
"""

from __future__ import annotations

import os
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import psycopg
import pytest
from django.db import connection, connections
from psycopg.conninfo import make_conninfo

from core import db_roles
from tests.support.db import as_web_process
from tests.support.streaming import databases

URL_ENV = {db_roles.WEB: "DATABASE_WEB_URL", db_roles.WORKER: "DATABASE_WORKER_URL"}


def login(role: str) -> tuple[str, str]:
    """The role's user and password: its URL's when the environment has one, else the name
    the deploy gives it (python3 -m dev, the compose files) and no password."""
    url = os.environ.get(URL_ENV[role], "")
    if url:
        parts = urlsplit(url)
        return unquote(parts.username or ""), unquote(parts.password or "")
    return db_roles.DEFAULT_LOGIN_ROLES[role], ""


def connect(role: str) -> psycopg.Connection[Any]:
    """An autocommit connection to the test database as `role`, with no startup options."""
    s = connection.settings_dict
    user, password = login(role)
    conninfo = make_conninfo(
        host=s["HOST"] or "127.0.0.1",
        port=str(s["PORT"] or 5432),
        dbname=s["NAME"],
        user=user,
        password=password or None,
        options="",
    )
    try:
        return psycopg.connect(conninfo, autocommit=True)
    except psycopg.OperationalError as error:
        if os.environ.get("CI", "").lower() == "true":
            raise
        pytest.skip(f"cannot connect as the {role} role {user!r} ({error}): see docs/")


def role_url(role: str) -> str:
    """The test database's URL as `role` (for a subprocess's DATABASE_*_URL)."""
    s = connection.settings_dict
    user, password = login(role)
    auth = user + (f":{quote(password, safe='')}" if password else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def deployed_env(role: str) -> dict[str, str]:
    """A subprocess's environment as the compose files give it to a `role` service: its own
    URL (the web one also the worker's, for its platform work), nothing bypassing by itself."""
    connect(role).close()
    for needed in (db_roles.WEB, db_roles.WORKER):
        connect(needed).close()
    env = {"DATABASE_ROLE": role, "DATABASE_WORKER_URL": role_url(db_roles.WORKER)}
    if role == db_roles.WEB:
        env["DATABASE_WEB_URL"] = role_url(db_roles.WEB)
    return {**env, "PGOPTIONS": "", db_roles.PROCESS_BYPASS_ENV: ""}


@contextmanager
def web_process(blocker: Any, *, platform: str = db_roles.WORKER) -> Iterator[None]:
    """This process as gunicorn would be with DATABASE_WEB_URL and DATABASE_WORKER_URL set:
    `default` connects as the web role, `platform` as the worker role (or `platform`'s),
    nothing bypasses by itself. `blocker`: pytest-django's django_db_blocker fixture. (Rows
    made before it, by the owner, are committed: transaction=True tests.)"""
    for role in (db_roles.WEB, platform):
        connect(role).close()  # skips when the server lacks the role
    template = connection.settings_dict
    web = {**template, "OPTIONS": {**template.get("OPTIONS", {}), "options": ""}}
    web["USER"], web["PASSWORD"] = login(db_roles.WEB)
    worker = {**template, "OPTIONS": {}}
    worker["USER"], worker["PASSWORD"] = login(platform)
    aliases = {"default": web, db_roles.PLATFORM_ALIAS: db_roles.platform_database(worker, web)}
    pgoptions = os.environ.pop("PGOPTIONS", None)  # the test process's bypass: not a web's
    try:
        with databases(aliases, routers=[]), as_web_process():
            # The test case refuses every alias it was not told of, and these exist only here:
            # their own wrappers connect with Django's real method (pytest-django keeps it).
            for alias in aliases:
                wrapper = connections[alias]
                real = blocker._real_ensure_connection
                wrapper.ensure_connection = types.MethodType(real, wrapper)  # type: ignore[method-assign]
            with connection.cursor() as cursor:
                cursor.execute("SELECT current_user")
                assert cursor.fetchone()[0] == web["USER"]
            yield
    finally:
        if pgoptions is not None:
            os.environ["PGOPTIONS"] = pgoptions
