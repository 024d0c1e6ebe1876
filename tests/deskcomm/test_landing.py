"""`/` is a small landing page (not a 404) with the links an operator or integrator needs, and the
admin's "View site" goes there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db


def test_the_landing_page_links_the_admin_docs_and_health(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    html = response.content.decode()
    for link in ('href="/admin/"', 'href="/api/docs/"', 'href="/api/v1/health"'):
        assert link in html


def test_view_site_in_the_admin_goes_to_the_landing_page(client: Client) -> None:
    client.force_login(User.objects.create_superuser("ops", password="pw-not-used"))
    html = client.get("/admin/").content.decode()
    assert '<a href="/">View site</a>' in html
    assert client.get("/").status_code == 200
