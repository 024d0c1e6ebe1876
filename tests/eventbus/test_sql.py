"""The bus's named statements as sent: comment lines gone, the name kept, every one short enough
for psycopg's placeholder cache, and none that the stripping could cut into."""

from __future__ import annotations

import pytest
from psycopg import _queries

from eventbus.sql import SQL_DIR, statement, without_comment_lines

NAMES = sorted(path.stem for path in SQL_DIR.glob("*.sql"))


def test_comment_lines_and_blank_lines_go_the_name_line_stays() -> None:
    text = "-- name: demo\n-- why it is so\n\nSELECT 1  -- inline stays\n   -- indented\nFROM t\n"

    assert without_comment_lines(text) == "-- name: demo\nSELECT 1  -- inline stays\nFROM t\n"


PLAIN = [name for name in NAMES if "$$" not in (SQL_DIR / f"{name}.sql").read_text()]


def test_a_function_definition_is_sent_as_written_its_comments_are_its_body() -> None:
    assert "emit_event" not in PLAIN  # (the migrated function must equal the file: test_emitter)
    assert statement("emit_event") == (SQL_DIR / "emit_event.sql").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", PLAIN)
def test_each_statement_is_sent_without_its_header_and_named(name: str) -> None:
    sent = statement(name)

    first = sent.splitlines()[0]
    assert first == f"-- name: {name}" or first.startswith(f"-- {name}: ")
    assert not any(line.lstrip().startswith("--") for line in sent.splitlines()[1:])


@pytest.mark.parametrize("name", ["emit_insert_one", "emit_insert_many", "ack", "nack"])
def test_the_per_event_and_per_settle_statements_fit_psycopgs_placeholder_cache(name: str) -> None:
    # Longer texts are re-parsed by psycopg on every execute (its _query2pg_nocache).
    assert len(statement(name).encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH


@pytest.mark.parametrize("name", PLAIN)
def test_no_statement_has_a_multi_line_string_literal(name: str) -> None:
    # Else a line inside the literal starting with "--" would be dropped as a comment.
    for line in (SQL_DIR / f"{name}.sql").read_text(encoding="utf-8").splitlines():
        code = line.split("--", 1)[0] if not line.lstrip().startswith("--") else ""
        assert code.count("'") % 2 == 0, f"{name}.sql: a string literal spans lines: {line!r}"
