"""The two embedded clusters: the product's keeps every durability setting, the suite's does not
fsync (dev/postgres.py says why)."""

from __future__ import annotations

import pytest
from django.db import connection

from dev import postgres
from tests.support.pgserver import embedded_test_server

DURABILITY = {"fsync", "full_page_writes", "synchronous_commit"}


def test_the_product_cluster_keeps_durability_and_lives_apart_from_the_suite_s() -> None:
    assert not DURABILITY & set(postgres.PRODUCT.settings)
    assert postgres.TESTS.settings == dict.fromkeys(DURABILITY, "off")
    assert postgres.PRODUCT.root != postgres.TESTS.root
    product_ports = range(postgres.PRODUCT.first_port, postgres.PRODUCT.first_port + 100)
    assert postgres.TESTS.first_port not in product_ports


@pytest.mark.django_db
def test_the_suite_runs_on_its_own_cluster_without_fsync() -> None:
    if embedded_test_server() is None:
        pytest.skip("the suite runs on the server DATABASE_URL names, not an embedded one")
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('fsync'), current_setting('full_page_writes')")
        assert cursor.fetchone() == ("off", "off")
