"""API keys: format, hashing, scopes, create/revoke services and commands, last-used writes."""

from __future__ import annotations

import datetime as dt
import hashlib
import io

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core import api_keys, scopes, selectors, services
from core.management.commands.create_api_key import Command as CreateApiKey
from core.models import SYSTEM_ORGANIZATION_ID, ApiKey, AuditLog, Organization
from tests.support.api import client_for, issue_key

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 7, 1, 8, 0, tzinfo=dt.UTC)


def test_keys_are_random_prefixed_and_only_their_hash_is_stored(org: Organization) -> None:
    key, full = services.api_key_create(
        organization=org, name="ERP", scopes_granted=["events:read"], actor="test"
    )
    assert api_keys.prefix_of(full) == key.prefix
    assert full.startswith(f"{key.display_prefix}_")
    assert key.secret_hash == hashlib.sha256(full.encode()).hexdigest()
    stored = ApiKey.objects.filter(pk=key.pk).values()[0]
    assert full not in str(stored)
    other = issue_key(org, "events:read")
    assert other[:16] != full[:16] and other[16:] != full[16:]


def test_create_validates_scopes_and_name_and_writes_nothing_on_error(org: Organization) -> None:
    with pytest.raises(scopes.UnknownScopeError, match="events:delete"):
        services.api_key_create(
            organization=org, name="x", scopes_granted=["events:delete"], actor="t"
        )
    with pytest.raises(ValueError, match="at least one scope"):
        services.api_key_create(organization=org, name="x", scopes_granted=[], actor="t")
    with pytest.raises(ValueError, match="name is required"):
        services.api_key_create(
            organization=org, name="  ", scopes_granted=["events:read"], actor="t"
        )
    assert not ApiKey.objects.exists()
    assert not AuditLog.objects.exists()


def test_scope_registry() -> None:
    assert {"events:read", "events:write", "outbox:read", "outbox:reprocess"} <= set(
        scopes.declared()
    )
    assert scopes.declare("events:read", scopes.declared()["events:read"]) == "events:read"
    with pytest.raises(ValueError, match="already declared"):
        scopes.declare("events:read", "something else")
    with pytest.raises(ValueError, match="resource:action"):
        scopes.declare("Events", "bad")
    assert scopes.validate(["outbox:read", "events:read", "outbox:read"]) == [
        "events:read",
        "outbox:read",
    ]


def test_create_and_revoke_are_audited(org: Organization) -> None:
    key, _ = services.api_key_create(
        organization=org, name="BI", scopes_granted=["events:read"], actor="user:ana"
    )
    assert services.api_key_revoke(api_key=key, actor="user:ana", reason="leaked")
    assert not services.api_key_revoke(api_key=key, actor="user:ana")
    rows = list(AuditLog.objects.order_by("id").values_list("action", "actor", "reason"))
    assert rows == [("api_key.create", "user:ana", ""), ("api_key.revoke", "user:ana", "leaked")]


def test_last_used_is_written_at_most_once_a_minute(org: Organization) -> None:
    client = client_for(issue_key(org, "events:read"))
    with time_machine.travel(T0, tick=False) as clock:
        client.get("/api/v1/events")
        assert ApiKey.objects.get().last_used_at == T0
        clock.shift(dt.timedelta(seconds=59))
        with CaptureQueriesContext(connection) as queries:
            client.get("/api/v1/events")
        assert not [q for q in queries.captured_queries if 'UPDATE "deskcomm_apikey"' in q["sql"]]
        assert ApiKey.objects.get().last_used_at == T0
        clock.shift(dt.timedelta(seconds=2))
        client.get("/api/v1/events")
        assert ApiKey.objects.get().last_used_at == T0 + dt.timedelta(seconds=61)


def test_create_api_key_command_prints_the_key_once(org: Organization) -> None:
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "create_api_key",
        "--organization",
        "acme",
        "--name",
        "ERP sync",
        "--scopes",
        "events:read,events:write",
        "outbox:read",
        stdout=out,
        stderr=err,
    )
    full = out.getvalue().strip()
    key = ApiKey.objects.get()
    assert api_keys.matches(full, key.secret_hash)
    assert key.scopes == ["events:read", "events:write", "outbox:read"]
    assert "not shown again" in err.getvalue()
    assert client_for(full).get("/api/v1/events").status_code == 200


def test_create_api_key_command_errors(org: Organization) -> None:
    with pytest.raises(CommandError, match="no organization with slug 'nope'; known slugs: acme"):
        call_command(
            "create_api_key", "--organization", "nope", "--name", "x", "--scopes", "events:read"
        )
    with pytest.raises(CommandError, match="unknown scope"):
        call_command(
            "create_api_key", "--organization", "acme", "--name", "x", "--scopes", "root:all"
        )
    assert not ApiKey.objects.exists()


def test_revoke_api_key_command(org: Organization) -> None:
    token = issue_key(org)
    out = io.StringIO()
    call_command("revoke_api_key", token[:16], "--reason", "rotated", stdout=out)
    assert "Revoked" in out.getvalue()
    assert client_for(token).get("/api/v1/events").status_code == 401
    with pytest.raises(CommandError, match="no API key"):
        call_command("revoke_api_key", "dck_000000000000")


def test_the_request_lookup_loads_the_key_as_the_orm_does(org: Organization) -> None:
    key, full = services.api_key_create(
        organization=org, name="ERP", scopes_granted=["events:read", "events:write"], actor="t"
    )
    services.api_key_revoke(api_key=key, actor="t")
    loaded = selectors.api_key_for_token(full)
    assert loaded is not None and not loaded._state.adding
    stored = ApiKey.objects.get(pk=key.pk)
    fields = [f.attname for f in ApiKey._meta.concrete_fields]
    assert {f: getattr(loaded, f) for f in fields} == {f: getattr(stored, f) for f in fields}
    assert loaded.revoked_at is not None and loaded.scopes == ["events:read", "events:write"]
    assert selectors.api_key_for_token(full[:-1] + ("A" if full[-1] != "A" else "B")) is None
    assert selectors.api_key_for_token("dck_000000000000_" + "x" * 43) is None


def test_create_api_key_names_and_makes_platform_keys_of_the_system_organization(
    org: Organization,
) -> None:
    Organization.objects.filter(pk=SYSTEM_ORGANIZATION_ID).delete()  # made on demand
    parser = CreateApiKey().create_parser("manage.py", "create_api_key")
    assert "`system` makes a platform key" in " ".join(parser.format_help().split())
    with pytest.raises(CommandError, match="known slugs: acme \\(`system` makes a platform key"):
        call_command(
            "create_api_key", "--organization", "nope", "--name", "x", "--scopes", "events:read"
        )
    err = io.StringIO()
    call_command(
        "create_api_key",
        "--organization",
        "system",
        "--name",
        "ops",
        "--scopes",
        "consumers:read",
        "consumers:write",
        stdout=io.StringIO(),
        stderr=err,
    )
    assert ApiKey.objects.get().organization_id == SYSTEM_ORGANIZATION_ID
    assert "for system (a platform key)" in err.getvalue()
