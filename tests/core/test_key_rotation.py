"""`rotate_encryption_key`: every context (webhook secrets, CPF, any added later), batches,
dual-read during the rotation, the old key removable after, and an audit record."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.apps import apps
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import models
from django.test.utils import override_settings
from django.utils import timezone

from ai.models import AiAccount
from core import crypto
from core.models import AuditLog, Organization
from crm.models import Contact
from nuvemshop.models import Store
from pipelines.models import Pipeline
from webhooks import selectors
from webhooks.models import Subscription
from whatsapp.models import WahaSession

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
    assert AuditLog.objects.get(action="secret.rotated").target_id == "webhook_secrets"
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
    known = "known: ai_provider, cpf, oauth, pipeline_secrets, waha_byo, webh"
    with pytest.raises(CommandError, match=f"unknown encryption context 'no_such'; {known}"):
        rotate("--context", "no_such")


def test_cpf_rotation_with_the_real_command(org: Organization) -> None:
    with override_settings(ENCRYPTION_KEYS={"cpf": [OLD]}):
        for i in range(5):
            contact = Contact(organization=org, name=f"Pessoa {i}")
            contact.cpf = f"123.456.789-0{i}"
            contact.save()
        Contact.objects.create(organization=org, name="Sem CPF")  # nothing stored, nothing to do
    with override_settings(ENCRYPTION_KEYS={"cpf": [NEW, OLD]}):
        output = rotate("--context", "cpf", "--batch-size", "2")
    assert "cpf: 5 re-encrypted, 0 already current, 0 not readable" in output
    with override_settings(ENCRYPTION_KEYS={"cpf": [NEW]}):
        cpfs = sorted(c.cpf for c in Contact.objects.all())
    assert cpfs == ["", *(f"123.456.789-0{i}" for i in range(5))]
    with override_settings(ENCRYPTION_KEYS={"cpf": [OLD]}), pytest.raises(crypto.DecryptionError):
        [c.cpf for c in Contact.objects.exclude(cpf_encrypted="")]
    record = AuditLog.objects.get(action="secret.rotated")
    assert (record.target_id, record.actor) == ("cpf", record.actor)
    assert record.actor.startswith("cli:")
    assert record.details["rewritten"] == 5 and record.details["remaining"] == 0
    assert record.details["fields"] == ["crm.Contact.cpf_encrypted"]


# One way to create a row per model that holds an encrypted field: a new encrypted model without
# one fails test_every_registered_field_is_rotated.
ROW_FACTORIES: dict[str, Callable[[Organization], models.Model]] = {
    "ai.AiAccount": lambda org: AiAccount.objects.create(
        organization=org, daily_budget_cents=1, spent_day=dt.date(2026, 12, 1)
    ),
    "crm.Contact": lambda org: Contact.objects.create(organization=org, name="x"),
    "webhooks.Subscription": lambda org: Subscription.objects.create(
        organization=org, url="https://h.example.com/", event_types=["*"], secret_encrypted="-"
    ),
    "nuvemshop.Store": lambda org: Store.objects.create(organization=org, ns_store_id=1),
    "whatsapp.WahaSession": lambda org: WahaSession.objects.create(organization=org, name="rot"),
    "pipelines.Pipeline": lambda org: Pipeline.objects.create(
        organization=org, name="rot", trigger="order.post"
    ),
}


def registered() -> list[tuple[str, str, str]]:
    return [
        (context, label, field)
        for context in crypto.rotatable_contexts()
        for label, field in crypto.encrypted_fields(context)
    ]


def test_every_registered_field_is_rotated(org: Organization) -> None:
    fields = registered()
    contexts = sorted({context for context, *_ in fields})
    rows: dict[str, models.Model] = {}
    for context, label, field in fields:
        assert label in ROW_FACTORIES, f"add a row factory for {label} (holds {context})"
        if label not in rows:
            rows[label] = ROW_FACTORIES[label](org)
        row = rows[label]
        with override_settings(ENCRYPTION_KEYS={context: [OLD]}):
            token = crypto.encrypt(context, f"{label}.{field}")
        type(row)._default_manager.filter(pk=row.pk).update(**{field: token})
    with override_settings(ENCRYPTION_KEYS={c: [NEW, OLD] for c in contexts}):
        for context in contexts:
            assert " 0 not readable" in rotate("--context", context)
    with override_settings(ENCRYPTION_KEYS={c: [NEW] for c in contexts}):
        for context, label, field in fields:
            row = rows[label]
            stored = type(row)._default_manager.values_list(field, flat=True).get(pk=row.pk)
            assert crypto.decrypt(context, stored) == f"{label}.{field}"
    assert AuditLog.objects.filter(action="secret.rotated").count() == len(contexts)


def test_every_encrypted_column_is_registered() -> None:
    """A column holding ciphertext (named `*_encrypted`) that no context declares would keep its
    old key forever: the rotation only rewrites declared fields."""
    declared = {(label, field) for _, label, field in registered()}
    columns = {
        (model._meta.label, field.name)
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.name.endswith("_encrypted")
    }
    assert columns <= declared, columns - declared


def test_every_configured_context_can_be_rotated() -> None:
    assert set(settings.ENCRYPTION_KEYS) <= set(crypto.rotatable_contexts())
