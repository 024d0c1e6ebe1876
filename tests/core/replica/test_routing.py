"""Which reads the replica serves: the views marked for it, never a write or a transaction, not
an operator who just acted; with the request's tenant scope on the replica's session too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connections, router, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext

import eventbus
from core import rls
from core.models import Organization
from core.replica.conf import ALIAS, PRIMARY
from core.replica.routing import PIN_COOKIE, replica_reads
from eventbus.models import EventLog
from tests.support.api import api_client
from tests.support.factories import OrganizationFactory
from tests.support.streaming import StreamingPair

# The pair's servers, not the test database, hold these tests' rows; the marker is what makes
# pytest-django create the test database the pair is copied from.
pytestmark = pytest.mark.django_db(transaction=True)

EVENTS = "/api/v1/events"


def emit_one(organization: Organization) -> uuid.UUID:
    event = eventbus.emit(
        "test.effect", organization=organization, entity_kind="thing", payload={"n": 1}
    )
    return event.id


def listed(response: Any) -> set[str]:
    assert response.status_code == 200, response.content[:500]
    return {item["id"] for item in response.json()["results"]}


def test_the_api_list_reads_the_replica_and_the_detail_the_primary(
    replicated: StreamingPair,
) -> None:
    org = OrganizationFactory()
    client = api_client(org, "events:read")
    old = emit_one(org)
    replicated.wait_caught_up()
    replicated.pause_replay()
    new = emit_one(org)  # on the primary only: the standby applies nothing now

    with CaptureQueriesContext(connections[ALIAS]) as on_replica:
        seen = listed(client.get(EVENTS))
    assert seen == {str(old)}  # the replica's view of the organization
    assert any("event_log" in query["sql"] for query in on_replica.captured_queries)
    # The detail endpoint is not marked: the primary, which has the new event.
    assert client.get(f"{EVENTS}/{new}").status_code == 200
    replicated.resume_replay()
    assert listed(client.get(EVENTS)) == {str(old), str(new)}
