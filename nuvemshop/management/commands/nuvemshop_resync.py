"""`manage.py nuvemshop_resync NS_STORE_ID`: queue a store's full sync (the admin's "Resync")."""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from nuvemshop import services
from nuvemshop.models import Store


class Command(BaseCommand):
    help = "Queue nuvemshop.full_resync for a connected store (nuvemshop-sync-worker runs it)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("ns_store_id", type=int, help="The store's Nuvemshop id (user_id).")

    def handle(self, *args: Any, **options: Any) -> None:
        store = Store.objects.filter(ns_store_id=options["ns_store_id"]).first()
        if store is None:
            raise CommandError(f"no store {options['ns_store_id']}")
        if not store.syncing:
            raise CommandError(f"store {store.ns_store_id} is {store.status}: reconnect it first")
        services.full_resync_request(store=store, actor="command:nuvemshop_resync")
        self.stdout.write(f"full sync of store {store.ns_store_id} queued")
