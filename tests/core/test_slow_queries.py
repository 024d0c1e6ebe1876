"""The slow-queries view over pg_stat_statements (top 20): the command and the exporter, on the
embedded server (which preloads the library)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from core.slow_queries import SlowStatementsCollector, top
from tests.support.db import as_superuser

pytestmark = pytest.mark.django_db


def installed() -> bool:
    """The extension in this worker's database; False if the server does not preload it."""
    as_superuser("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_stat_statements LIMIT 1")
    except DatabaseError:
        return False
    return True


def test_the_slowest_statements_are_listed_and_exported() -> None:
    if not installed():
        pytest.skip("the server does not preload pg_stat_statements")
    # An alias is not part of a statement's identity: another test's shorter pg_sleep($1) in this
    # database would be the same statement (and lower its mean), so this database's figures start
    # from zero; other workers' databases keep theirs.
    as_superuser(
        "SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database"
        " WHERE datname = current_database()), 0)"
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_sleep(0.2) AS slow_query_marker")
    statements = top()
    assert statements is not None and 1 <= len(statements) <= 20
    slow = next(s for s in statements if "slow_query_marker" in s.query)
    assert slow.mean_ms >= 200
    out = StringIO()
    call_command("slow_queries", stdout=out)
    assert "slow_query_marker" in out.getvalue() and out.getvalue().startswith("mean_ms\t")
    mean, calls = SlowStatementsCollector().collect()
    exported = {s.labels["queryid"]: s.value for s in mean.samples}
    assert exported[str(slow.queryid)] == pytest.approx(slow.mean_ms / 1000)
    # the calls gauge covers the same top list (statements run since `top()` may have joined it)
    calls_by_id = {s.labels["queryid"]: s.value for s in calls.samples}
    assert len(calls_by_id) <= 20 and calls_by_id[str(slow.queryid)] == 1


def test_without_the_extension_the_command_says_how_to_enable_it() -> None:
    as_superuser("DROP EXTENSION IF EXISTS pg_stat_statements")
    with pytest.raises(CommandError, match="shared_preload_libraries"):
        call_command("slow_queries")
    assert SlowStatementsCollector().collect().__next__().samples == []
