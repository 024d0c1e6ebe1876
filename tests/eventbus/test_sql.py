"""The bus's named statements as sent: their parts included, comment lines gone, the name kept,
every one short enough for psycopg's placeholder cache, and none that the stripping could cut
into."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg import _queries

from eventbus.store.sql import PARTS_DIR, SQL_DIR, statement, with_parts, without_comment_lines

NAMES = sorted(path.stem for path in SQL_DIR.glob("*.sql"))
PARTS = sorted(PARTS_DIR.glob("*.sql"))


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


# The claims that fit: all but claim_ordered (10 kB, its key walk; re-parsed on each claim, a
# fraction of a microsecond per delivery claimed). claim.sql was 4,117 bytes until key_turn.sql
# lost an inline comment (it is used twice).
CLAIMS_THAT_FIT = ["claim", "claim_isolated", "claim_prefixed", "isolated_due"]


@pytest.mark.parametrize(
    "name",
    ["emit_insert_one", "emit_insert_many", "ack", "nack", *CLAIMS_THAT_FIT],
)
def test_the_emit_settle_and_small_claim_statements_fit_psycopgs_placeholder_cache(
    name: str,
) -> None:
    # Longer texts are re-parsed by psycopg on every execute (its _query2pg_nocache).
    assert len(statement(name).encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH


@pytest.mark.parametrize(
    "path",
    [SQL_DIR / f"{name}.sql" for name in PLAIN] + PARTS,
    ids=lambda p: str(p.relative_to(SQL_DIR)),
)
def test_no_statement_has_a_multi_line_string_literal(path: Path) -> None:
    # Else a line inside the literal starting with "--" would be dropped as a comment.
    for line in path.read_text(encoding="utf-8").splitlines():
        code = line.split("--", 1)[0] if not line.lstrip().startswith("--") else ""
        assert code.count("'") % 2 == 0, f"{path.name}: a string literal spans lines: {line!r}"


def test_an_include_line_is_replaced_by_its_part_indented_as_the_line(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "due.sql").write_text("-- part: due, why\nWHERE due\n  -- include: parts/mine.sql\n")
    (parts / "mine.sql").write_text("-- part: mine\nAND mine\n\n  AND NOT paused\n")
    demo = tmp_path / "demo.sql"
    demo.write_text(
        "-- name: demo\n-- why\nSELECT (\n    SELECT 1 FROM t\n    -- include: parts/due.sql\n)\n"
    )

    assert without_comment_lines(with_parts(demo, parts)) == (
        "-- name: demo\nSELECT (\n    SELECT 1 FROM t\n    WHERE due\n      AND mine\n"
        "        AND NOT paused\n)\n"
    )


def test_a_missing_part_fails_the_load_naming_the_line(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "known.sql").write_text("SELECT 1\n")
    demo = tmp_path / "demo.sql"
    demo.write_text("-- name: demo\nSELECT 1\n-- include: parts/gone.sql\n")

    with pytest.raises(LookupError, match=r"demo\.sql:3 includes parts/gone\.sql, .* parts: known"):
        with_parts(demo, tmp_path / "parts")


@pytest.mark.parametrize(
    "directive", ["-- include parts/due.sql", "-- include: due.sql", "--include: parts/due"]
)
def test_a_misspelt_include_fails_the_load_rather_than_drop_a_clause(
    tmp_path: Path, directive: str
) -> None:
    demo = tmp_path / "demo.sql"
    demo.write_text(f"-- name: demo\nSELECT 1\n  {directive}\n")

    with pytest.raises(ValueError, match=r"demo\.sql:3: not an include directive"):
        with_parts(demo, tmp_path)


def test_a_part_that_includes_itself_fails_the_load(tmp_path: Path) -> None:
    (tmp_path / "loop.sql").write_text("AND x\n-- include: parts/loop.sql\n")
    demo = tmp_path / "demo.sql"
    demo.write_text("-- name: demo\n-- include: parts/loop.sql\n")

    with pytest.raises(ValueError, match=r"loop\.sql:2: parts/loop\.sql includes itself"):
        with_parts(demo, tmp_path)


def test_the_isolated_probe_is_sent_as_the_whole_statement_its_parts_make() -> None:
    # isolated_due.sql + parts/isolated_waiting.sql + parts/key_turn.sql, as the server sees it.
    assert statement("isolated_due") == (
        "-- name: isolated_due\n"
        "SELECT EXISTS (\n"
        "    SELECT 1 FROM eventbus_delivery d\n"
        "     WHERE d.status = 'pending' AND d.isolate AND d.next_attempt_at <= %(now)s\n"
        "       AND d.consumer = ANY(%(consumers)s::text[])\n"
        "       AND NOT EXISTS (SELECT 1 FROM eventbus_consumer_state s  -- paused: left pending\n"
        "                        WHERE s.consumer = d.consumer AND s.state <> 'running')\n"
        "       AND (d.ordering_key IS NULL OR NOT EXISTS (\n"
        "             SELECT 1 FROM eventbus_delivery o\n"
        "              WHERE o.consumer = d.consumer AND o.organization_id = d.organization_id\n"
        "                AND o.ordering_key = d.ordering_key AND o.ordering_key IS NOT NULL\n"
        "                AND o.status IN ('pending', 'processing')\n"
        "                AND (o.id < d.id OR o.status = 'processing')))\n"
        ") AS due\n"
    )


@pytest.mark.parametrize("path", PARTS, ids=lambda path: path.name)
def test_each_part_says_what_it_is_and_a_statement_uses_it(path: Path) -> None:
    assert path.read_text(encoding="utf-8").startswith(f"-- part: {path.stem}, ")
    directive = f"-- include: parts/{path.name}"
    users = [
        p for p in [*SQL_DIR.glob("*.sql"), *PARTS] if directive in p.read_text(encoding="utf-8")
    ]
    assert users, f"parts/{path.name} is included by no statement"
