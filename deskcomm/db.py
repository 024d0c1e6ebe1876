"""libpq connection strings for connections Django does not manage (LISTEN, locks, brokers)."""

from __future__ import annotations

from django.db import connections
from psycopg.conninfo import make_conninfo


def conninfo(alias: str = "default") -> str:
    """The conninfo of Django database `alias`, read now (the test database under pytest)."""
    settings_dict = connections[alias].settings_dict
    params = {
        "dbname": settings_dict["NAME"],
        "user": settings_dict.get("USER"),
        "password": settings_dict.get("PASSWORD"),
        "host": settings_dict.get("HOST"),
        "port": settings_dict.get("PORT"),
    }
    return make_conninfo(**{k: str(v) for k, v in params.items() if v})
