"""Project URLs (deskcomm/urls.py)."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/deskcomm/auditlog/?actor=x", "/admin/core/auditlog/?actor=x"),
        ("/admin/deskcomm/contact/", "/admin/crm/contact/"),
        ("/admin/deskcomm/jobrun/5/change/", "/admin/jobs/jobrun/5/change/"),
    ],
)
def test_admin_links_from_before_the_layering_split_redirect(old: str, new: str) -> None:
    response = Client().get(old)
    assert response.status_code == 301
    assert response["Location"] == new


def test_an_unknown_model_under_the_old_prefix_is_not_found(db: None) -> None:
    assert Client().get("/admin/deskcomm/nothing/").status_code == 404
