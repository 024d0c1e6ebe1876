"""`manage.py bootstrap_demo`: a demo organization and an admin user for a first run."""

from __future__ import annotations

import os
import secrets
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from core.models import Organization

DEFAULT_USERNAME = "admin"


class Command(BaseCommand):
    help = "Create the demo organization and an admin user (idempotent); print how to log in."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--username", default=DEFAULT_USERNAME)
        parser.add_argument(
            "--reset-password",
            action="store_true",
            help="Give an existing admin user a new random password.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            org, created_org = Organization.objects.get_or_create(
                slug="demo", defaults={"name": "Demo organization"}
            )
            password = self._ensure_admin(options["username"], options["reset_password"])
        port = os.environ.get("PORT", "8000")
        self.stdout.write(
            self.style.SUCCESS(
                f"organization: {org.name} (slug={org.slug}, id={org.pk})"
                + (" [created]" if created_org else "")
            )
        )
        self.stdout.write(f"admin:        http://127.0.0.1:{port}/admin/")
        reset = reset_command(options["username"])
        if password:
            self.stdout.write(
                self.style.WARNING(
                    f"login:        {options['username']} / {password}   (shown once; "
                    f"a new one: {reset})"
                )
            )
        else:
            self.stdout.write(
                f"login:        {options['username']} (existing user; password unchanged; "
                f"a new one: {reset})"
            )

    def _ensure_admin(self, username: str, reset: bool) -> str | None:
        user_model = get_user_model()
        user = user_model.objects.filter(username=username).first()
        if user is not None and not reset:
            return None
        password = secrets.token_urlsafe(12)
        if user is None:
            user_model.objects.create_superuser(username=username, email="", password=password)
        else:
            user.set_password(password)
            user.save(update_fields=["password"])
        return password


def reset_command(username: str) -> str:
    """The whole command that gives `username` a new password, as a local checkout runs it
    (`python3 -m dev manage` sets the database; elsewhere: `python manage.py ...`)."""
    user = "" if username == DEFAULT_USERNAME else f" --username {username}"
    return f"python3 -m dev manage bootstrap_demo --reset-password{user}"
