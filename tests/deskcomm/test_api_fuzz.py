"""Property-based fuzzing of the OpenAPI schema (schemathesis) against the live test server.

Every operation gets schema-valid and schema-violating requests (headers, query, path, body),
authenticated with a key holding every scope, over real HTTP on loopback. The checks: never a
5xx, status codes, content types, headers and bodies as documented, invalid input rejected, no
access without the key.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance

import eventbus
from deskcomm.models import Organization
from tests.support.api import issue_key

# Enough examples per operation to reach the interesting shapes, few enough for 2 cores.
MAX_EXAMPLES = 50


@pytest.fixture
def api_token(transactional_db: None, settings: Any) -> str:
    settings.API = {"THROTTLE_RATE": "1000000/minute"}  # fuzzing is not a rate-limit test
    org = Organization.objects.create(name="Fuzz", slug="fuzz")
    eventbus.emit_many(
        [{"event_type": "test.job", "entity_kind": "t", "payload": {"n": i}} for i in range(3)],
        organization=org,
    )
    return issue_key(org)


def load_schema() -> Any:
    """The schema /api/schema/ serves, generated in-process at collection time.

    (schemathesis' lazy `from_fixture` loader does not run under pytest 9, so the schema is
    built up front and only the base URL comes from the live server.)
    """
    document = SchemaGenerator().get_schema(request=None, public=True)
    loaded = schemathesis.openapi.from_dict(json.loads(OpenApiJsonRenderer().render(document)))
    loaded.config.generation.update(max_examples=MAX_EXAMPLES)
    return loaded


# The webhook endpoints are fuzzed once their schema documents every response (in progress).
schema = load_schema().exclude(path_regex="^/api/v1/webhooks/")


@schema.parametrize()
@settings(
    deadline=None,
    database=None,  # nothing written into the work tree
    suppress_health_check=list(HealthCheck),
)
def test_the_api_honours_its_schema(case: Any, live_server: Any, api_token: str) -> None:
    case.call_and_validate(
        base_url=live_server.url,
        headers={"Authorization": f"Bearer {api_token}"},
        # "Schema-valid means accepted" cannot hold here: an event type must be in the catalog
        # (and its payload hold that type's fields), and a cursor must come from `next_cursor`.
        # Those are 400s with field errors, which every other check still verifies.
        excluded_checks=[positive_data_acceptance],
    )
