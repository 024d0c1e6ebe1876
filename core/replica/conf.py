"""The replica's knobs (`settings.DATABASE_REPLICA`) and its database alias."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from core.conf import AppSettings

ALIAS = "replica"
PRIMARY = "default"
# A standby that does not answer soon is a standby we do not use: the request reads the primary.
CONNECT_TIMEOUT_SECONDS = 2


class ReplicaSettings(AppSettings, namespace="DATABASE_REPLICA"):
    """Each `settings.DATABASE_REPLICA` knob with its type and default (env: settings.py)."""

    # Replay lag past which reads go back to the primary, seconds.
    MAX_LAG: float = 5.0
    # How long a process trusts its last lag measurement, seconds (one check per this, at most).
    CHECK_INTERVAL: float = 1.0
    # After an operator's write (POST...), their reads stay on the primary this long, seconds.
    PRIMARY_AFTER_WRITE_SECONDS: float = 15.0


replica_settings = ReplicaSettings()


def configured() -> bool:
    """Whether the `replica` alias exists (DATABASE_REPLICA_URL was set)."""
    return ALIAS in settings.DATABASES


def replica_database(replica: dict[str, Any], primary: dict[str, Any]) -> dict[str, Any]:
    """The replica alias's settings: its own server, the primary's session options (timeouts,
    row-level security) and connection reuse; under tests it mirrors the primary."""
    options = {**primary.get("OPTIONS", {}), **replica.get("OPTIONS", {})}
    options.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
    return {
        **replica,
        "OPTIONS": options,
        "CONN_MAX_AGE": primary.get("CONN_MAX_AGE", 0),
        "CONN_HEALTH_CHECKS": primary.get("CONN_HEALTH_CHECKS", False),
        "TEST": {"MIRROR": PRIMARY},
    }
