"""Property-based fuzzing of the OpenAPI schema (schemathesis) against the live test server.

Every operation gets schema-valid and schema-violating requests (headers, query, path, body),
authenticated with a key holding every scope, over real HTTP on loopback. The checks: never a
5xx, status codes, content types, headers and bodies as documented, invalid input rejected, no
access without the key; and ours: a rejected request wrote nothing, no webhook was sent, and
nothing but loopback was contacted (name lookups included).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.modes import GenerationMode

import eventbus
from core.models import Organization
from pipelines import services as pipeline_services
from tests.support.api import issue_key, snapshot
from tests.support.factories import ConversationFactory, LeadFactory
from tests.support.network import OffLoopback, loopback_only
from tests.support.pipelines import seed_example
from tests.webhooks.conftest import settle_as_sent
from webhooks import services as webhook_services
from webhooks.models import Attempt

# Enough examples per operation to reach the interesting shapes, few enough for 2 cores.
MAX_EXAMPLES = 50


@dataclass(frozen=True)
class World:
    token: str
    ids: dict[str, str]  # path parameter -> an existing object of the key's organization


@pytest.fixture
def world(transactional_db: None, settings: Any) -> World:
    """Events, an enabled subscription to a public host name and a done delivery to it."""
    settings.API = {"THROTTLE_RATE": "1000000/minute"}  # fuzzing is not a rate-limit test
    org = Organization.objects.create(name="Fuzz", slug="fuzz")
    subscription, _ = webhook_services.subscription_create(
        organization=org, url="https://hooks.example.com/fuzz", event_types=["*"], actor="fuzz"
    )
    events = eventbus.emit_many(
        [{"event_type": "test.job", "entity_kind": "t", "payload": {"n": i}} for i in range(3)],
        organization=org,
    )
    delivery_ids = settle_as_sent()  # done without sending: resend has something to resend
    pipeline = pipeline_services.pipeline_create(
        organization=org,
        name="Fuzz ERP",
        trigger="order.post",
        definition=seed_example("https://erp.example.com/orders"),
        actor="fuzz",
    )
    ids = {
        "event_id": events[0],
        "subscription_id": subscription.id,
        "delivery_id": delivery_ids[0],
        "pipeline_id": pipeline.id,
        "lead_id": LeadFactory(organization=org).id,
        "contact_id": ConversationFactory(
            organization=org, last_inbound_at=timezone.now()
        ).contact_id,
    }
    return World(issue_key(org), {name: str(value) for name, value in ids.items()})


@pytest.fixture
def loopback_network_only() -> Iterator[None]:
    with loopback_only() as refused:
        yield
    assert refused == [], f"the fuzz run tried to leave the machine: {refused}"


def load_schema() -> Any:
    """The schema /api/schema/ serves, generated in-process at collection time.

    (schemathesis' lazy `from_fixture` loader does not run under pytest 9, so the schema is
    built up front and only the base URL comes from the live server.)
    """
    document = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(document)))
    loaded.config.generation.update(max_examples=MAX_EXAMPLES)
    return loaded


schema = load_schema()


@pytest.mark.slow
@schema.parametrize()
@settings(
    deadline=None,
    database=None,  # nothing written into the work tree
    suppress_health_check=list(HealthCheck),
)
def test_the_api_honours_its_schema(
    case: Any, live_server: Any, world: World, loopback_network_only: None
) -> None:
    use_the_real_key(case, world)
    aim_at_existing_objects(case, world)
    before = snapshot()
    response = case.call(base_url=live_server.url)
    # "Schema-valid means accepted" cannot hold here: an event type must be in the catalog
    # (and its payload hold that type's fields), a cursor must come from `next_cursor`, a
    # webhook URL must pass the SSRF checks. Those are 400s with field errors, which every
    # other check still verifies.
    case.validate_response(response, excluded_checks=[positive_data_acceptance])
    if response.status_code >= 400:
        assert snapshot() == before, f"{response.status_code} but something was written"
    assert not Attempt.objects.exists(), "a webhook was sent during the fuzz run"


def use_the_real_key(case: Any, world: World) -> None:
    """Our key wherever the case sends a (generated) key; a case without one tests the 401.

    (Adding the key to every request instead would undo the cases that leave it out on
    purpose, which schemathesis then reports as accepted schema-violating requests.)
    """
    if case.headers and "Authorization" in case.headers:
        case.headers["Authorization"] = f"Bearer {world.token}"


def aim_at_existing_objects(case: Any, world: World) -> None:
    """Point schema-valid path ids at real objects of the key's organization.

    Random well-formed ids would only ever reach the 404 branch (the isolation matrix covers
    it); real ones reach the actions themselves (ping, rotate, resend, reprocess...) with
    generated bodies and headers. Schema-violating ids are left alone: they test rejection.
    """
    path = case.meta.components.get(ParameterLocation.PATH) if case.meta else None
    if path is not None and path.mode == GenerationMode.POSITIVE:
        for name in case.path_parameters.keys() & world.ids.keys():
            case.path_parameters[name] = world.ids[name]


def test_the_guard_refuses_every_host_but_loopback() -> None:
    """The fuzz run's guard is real: lookups and connections off loopback fail unsent."""
    with loopback_only() as refused:
        with pytest.raises(OffLoopback):
            socket.getaddrinfo("hooks.example.com", 443)
        with socket.socket() as client, pytest.raises(OffLoopback):
            client.connect(("192.0.2.1", 9))  # TEST-NET-1: would never answer anyway
        assert socket.getaddrinfo("localhost", 80)
        with socket.create_server(("127.0.0.1", 0)) as server:
            socket.create_connection(server.getsockname(), timeout=1).close()
    assert refused == ["socket.getaddrinfo 'hooks.example.com'", "socket.connect '192.0.2.1'"]
