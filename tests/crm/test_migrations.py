"""crm 0007's backfill of contact identities over existing data: duplicates never fail it (the
oldest contact keeps the key), and running it again changes nothing."""

from __future__ import annotations

import datetime as dt
import importlib
from types import SimpleNamespace

import pytest
import time_machine
from django.apps import apps
from django.db import connection

from core.models import Organization
from crm.models import ContactIdentity
from tests.support.factories import ContactFactory, ConversationFactory

pytestmark = pytest.mark.django_db

backfill = importlib.import_module("crm.migrations.0007_contact_identity").backfill_identities


def test_existing_duplicates_keep_their_rows_and_the_oldest_gets_the_key(
    org: Organization,
) -> None:
    with time_machine.travel(dt.datetime(2026, 1, 1, tzinfo=dt.UTC)):
        oldest = ContactFactory(organization=org, phone="+55 11 98765-4321", email="A@x.com")
    duplicate = ContactFactory(organization=org, phone="11 8765-4321", email="a@x.com")
    lid_only = ContactFactory(organization=org, phone="", email="")
    ConversationFactory(organization=org, contact=lid_only, external_chat_id="99@lid")
    editor = SimpleNamespace(connection=connection)
    backfill(apps, editor)
    backfill(apps, editor)  # again: nothing new, nothing fails
    keys = set(ContactIdentity.objects.values_list("contact_id", "kind", "value"))
    assert keys == {
        (oldest.pk, "phone", "+5511987654321"),
        (oldest.pk, "email", "a@x.com"),
        (lid_only.pk, "whatsapp_lid", "99@lid"),
    }
    assert duplicate.pk not in {k[0] for k in keys}
