"""`manage.py admin_recover USERNAME`: a staff user who lost their authenticator (or locked
themselves out) gets back in. Removes every OTP device of theirs (they enrol a new one at their
next login: core.admin_otp) and clears their django-axes lockouts and failure counts."""

from __future__ import annotations

import getpass
from typing import Any

from axes.utils import reset
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django_otp import devices_for_user

from core import audit


class Command(BaseCommand):
    help = "Reset a staff user's two-factor devices and unlock their failed-login lockouts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument(
            "--keep-devices", action="store_true", help="only unlock; keep the OTP devices"
        )
        parser.add_argument("--reason", default="", help="kept in the audit trail")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        removed = 0
        if not options["keep_devices"]:
            for device in devices_for_user(user, confirmed=None):
                device.delete()
                removed += 1
        unlocked = reset(username=username)
        audit.record(
            actor=f"cli:{getpass.getuser()}",
            action="admin.recover",
            target_type="auth.user",
            target_id=str(user.pk),
            reason=options["reason"],
            details={"devices_removed": removed, "lockouts_cleared": unlocked},
        )
        self.stdout.write(
            f"{username}: removed {removed} two-factor device(s); cleared {unlocked} "
            "failed-login record(s)."
        )
        if removed:
            self.stdout.write("At their next login they enrol a new authenticator.")
