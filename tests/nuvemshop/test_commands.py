"""`manage.py nuvemshop_resync`: queues the full sync of a connected store, refuses others."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from eventbus.store.models import EventLog
from nuvemshop.models import Store

pytestmark = pytest.mark.django_db


def test_resync_queues_the_job(store: Store) -> None:
    out = StringIO()
    call_command("nuvemshop_resync", "789", stdout=out)
    assert "queued" in out.getvalue()
    assert EventLog.objects.filter(event_type="nuvemshop.full_resync").count() == 1


def test_resync_refuses_a_store_that_does_not_sync(store: Store) -> None:
    Store.objects.filter(pk=store.pk).update(status="uninstalled")
    with pytest.raises(CommandError, match="uninstalled"):
        call_command("nuvemshop_resync", "789")
    with pytest.raises(CommandError, match="no store"):
        call_command("nuvemshop_resync", "1")
