"""DATABASE_REPLICA_URL: the replica alias and the router, only when it is set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from core.replica.conf import CONNECT_TIMEOUT_SECONDS, replica_database

REPO = Path(__file__).resolve().parents[3]
SHOW = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps({'aliases': sorted(settings.DATABASES), "
    "'routers': settings.DATABASE_ROUTERS, "
    "'replica': settings.DATABASES.get('replica', {}).get('HOST')}))"
)


def settings_with(**env: str) -> dict[str, object]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("DATABASE_REPLICA")}
    environment |= {"DJANGO_SETTINGS_MODULE": "deskcomm.settings", **env}
    shown = subprocess.run(
        [sys.executable, "-c", SHOW],
        check=False,
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
    )
    assert shown.returncode == 0, shown.stderr
    result: dict[str, object] = json.loads(shown.stdout.strip().splitlines()[-1])
    return result


def test_the_replica_alias_and_router_exist_only_when_configured() -> None:
    assert settings_with() == {"aliases": ["default"], "routers": [], "replica": None}
    configured = settings_with(DATABASE_REPLICA_URL="postgres://reader@standby.internal/deskcomm")
    assert configured == {
        "aliases": ["default", "replica"],
        "routers": ["core.replica.routing.ReplicaRouter"],
        "replica": "standby.internal",
    }


def test_the_replica_gets_the_primary_session_options_and_a_connect_timeout() -> None:
    primary = {
        "NAME": "deskcomm",
        "OPTIONS": {"options": "-c statement_timeout=20000"},
        "CONN_MAX_AGE": 60,
        "CONN_HEALTH_CHECKS": True,
    }
    replica = replica_database({"NAME": "deskcomm", "HOST": "standby", "OPTIONS": {}}, primary)
    assert replica["HOST"] == "standby"
    assert replica["OPTIONS"] == {
        "options": "-c statement_timeout=20000",
        "connect_timeout": CONNECT_TIMEOUT_SECONDS,
    }
    assert replica["CONN_MAX_AGE"] == 60 and replica["CONN_HEALTH_CHECKS"] is True
    assert replica["TEST"] == {"MIRROR": "default"}  # a test run never creates it
