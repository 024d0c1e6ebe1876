"""`rotate_encryption_key`: batches, dual-read during the rotation, old key removable after."""

from __future__ import annotations

from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.management import CommandError, call_command
from django.test.utils import override_settings
from django.utils import timezone

from deskcomm import crypto
from deskcomm.models import Organization
from webhooks import selectors
from webhooks.models import Subscription

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def make_subscriptions(org: Organization, n: int) -> list[Subscription]:
    return [
        Subscription.objects.create(
            organization=org,
            url=f"https://hooks.example.com/{i}",
            event_types=["*"],
            secret_encrypted=crypto.encrypt("webhook_secrets", f"whsec_c2VjcmV0{i}A=="),
            previous_secret_encrypted=(
                crypto.encrypt("webhook_secrets", f"whsec_b2xk{i}A==") if i % 2 else None
            ),
        )
        for i in range(n)
    ]


def rotate(*args: str) -> str:
    out = StringIO()
    call_command("rotate_encryption_key", *args, stdout=out)
    return out.getvalue()


def secrets(context_keys: list[str]) -> list[str]:
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": context_keys}):
        return [
            crypto.decrypt("webhook_secrets", s.secret_encrypted)
            for s in Subscription.objects.order_by("pk")
        ]


def test_round_trip_with_dual_read(org: Organization) -> None:
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": [OLD]}):
        subs = make_subscriptions(org, 5)
    expected = secrets([OLD])
    # During the rotation both keys read every value (dual-read), rotated or not.
    assert secrets([NEW, OLD]) == expected
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": [NEW, OLD]}):
        output = rotate("--context", "webhook_secrets", "--batch-size", "2")
        # The sender still reads every subscription while the rotation runs.
        assert len(selectors.targets_for([s.pk for s in subs], now=timezone.now())) == 5
    assert "7 re-encrypted, 0 already current, 0 not readable" in output
    # The old key can go: the new one alone reads everything, the old one alone nothing.
    assert secrets([NEW]) == expected
    with pytest.raises(crypto.DecryptionError):
        secrets([OLD])


def test_a_second_run_rewrites_nothing(org: Organization) -> None:
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": [NEW]}):
        make_subscriptions(org, 3)
        output = rotate("--context", "webhook_secrets")
    assert "0 re-encrypted, 4 already current" in output


def test_unreadable_values_are_reported(org: Organization) -> None:
    with override_settings(ENCRYPTION_KEYS={"webhook_secrets": [OLD]}):
        make_subscriptions(org, 1)
    with (
        override_settings(ENCRYPTION_KEYS={"webhook_secrets": [NEW]}),
        pytest.raises(CommandError, match="1 value"),
    ):
        rotate("--context", "webhook_secrets")


@pytest.mark.django_db
def test_unknown_context_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match="unknown encryption context 'cpf'.*webhook_secrets"):
        rotate("--context", "cpf")
