"""The lead admin pages in a real browser (headless Chromium) at a laptop's 1280 px: the list
with its filters, a lead with its activities and the "Mark won" page, with no horizontal
scroll. Screenshots go to test-artifacts/admin/."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from core.models import Organization
from crm import services
from tests.support.browser import Console, log_in
from tests.support.factories import ContactFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-Console-1"  # pragma: allowlist secret (a test login)


def test_lead_pages_fit_1280_px(browser: Any, live_server: Any, org: Organization) -> None:
    contact = ContactFactory(organization=org, name="Ana Beatriz Nascimento")
    lead = services.lead_create(
        organization=org,
        name="Loja da Ana: 40 camisetas bordadas para a equipe de vendas",
        source="web_form",
        stage_id="proposal",
        contact=contact,
        value_cents=1_234_500,
    )
    services.lead_activity_record(
        lead, kind="call", note="Pediu orçamento com bordado frente e costas " * 4
    )
    User.objects.create_superuser("ops", "ops@example.com", PASSWORD)
    log_in(browser, live_server.url, "ops", PASSWORD)
    ui = Console(browser, live_server.url)
    browser.set_window_size(1280, 900)
    pages = [
        ("/admin/crm/lead/", "12345.00", "crm-01-leads"),
        (f"/admin/crm/lead/{lead.pk}/change/", "Mark won", "crm-02-lead"),
        (f"/admin/crm/lead/{lead.pk}/won/", "lead.won", "crm-03-mark-won"),
    ]
    for path, text, shot in pages:
        ui.open(path)
        ui.wait_for_text(text)
        assert ui.horizontal_overflow() == 0, path
        ui.shot(shot, width=1280)
