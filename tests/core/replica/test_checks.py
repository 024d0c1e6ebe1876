"""The replica's system checks: a replica that is the primary, bad knobs, a missing router, and
(database checks, as `migrate` runs them) a replica unreachable or not a standby."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import Tags, run_checks

from core.replica.checks import check_replica_server, check_replica_settings
from core.replica.conf import ALIAS, PRIMARY
from tests.support.streaming import ROUTERS, StreamingPair, databases, free_ports, serving

pytestmark = pytest.mark.django_db(transaction=True)  # see test_routing.py


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def test_a_healthy_replica_passes(replicated: StreamingPair) -> None:
    assert check_replica_settings() == []
    assert check_replica_server(databases=[PRIMARY]) == []


def test_no_replica_no_messages() -> None:
    assert check_replica_settings() == []
    assert check_replica_server(databases=[PRIMARY]) == []


def test_a_replica_url_naming_the_primary_is_an_error(
    streaming_pair: StreamingPair, django_db_blocker: Any
) -> None:
    primary = streaming_pair.primary.django_settings({"ENGINE": "django.db.backends.postgresql"})
    same = {**primary, "HOST": "localhost"}  # another spelling of the same server
    with django_db_blocker.unblock(), databases({PRIMARY: primary, ALIAS: same}, routers=ROUTERS):
        assert ids(check_replica_settings()) == ["deskcomm.E030"]
        assert ids(check_replica_server(databases=[PRIMARY])) == ["deskcomm.W031"]


def test_bad_knobs_and_a_missing_router(
    streaming_pair: StreamingPair, django_db_blocker: Any, settings: Any
) -> None:
    settings.DATABASE_REPLICA = {"MAX_LAG": 0, "PRIMARY_AFTER_WRITE_SECONDS": -1}
    with django_db_blocker.unblock(), serving(streaming_pair):
        assert ids(check_replica_settings()) == ["deskcomm.E031", "deskcomm.E031"]
        settings.DATABASE_ROUTERS = []
        assert "deskcomm.W032" in ids(check_replica_settings())


def test_an_unreachable_replica_is_only_a_warning(
    streaming_pair: StreamingPair, django_db_blocker: Any
) -> None:
    [closed] = free_ports(1)
    template = {"ENGINE": "django.db.backends.postgresql", "OPTIONS": {"connect_timeout": 2}}
    nowhere = {**streaming_pair.replica.django_settings(template), "PORT": str(closed)}
    with django_db_blocker.unblock(), serving(streaming_pair, replica=nowhere):
        [warning] = check_replica_server(databases=[PRIMARY])
        # Every database check, even asked about the replica itself, runs through it.
        everything = run_checks(databases=[PRIMARY, ALIAS], tags=[Tags.database])
    assert warning.id == "deskcomm.W030" and "unreachable" in warning.msg
    assert not warning.is_serious()
    assert "deskcomm.W030" in ids(everything)
