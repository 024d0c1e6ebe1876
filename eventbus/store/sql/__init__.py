"""Named SQL statements of the bus, one complete statement per `.sql` file in this folder.

Each file is a whole statement under a header comment (what it does and why it is shaped so),
loaded by its file name: `statement("claim")` is `claim.sql`. Migrations apply frozen copies of
function definitions, never these live files.

The claims share pieces that must not drift apart (the organization scan, the runnable
consumers, the equal share, "this key's turn", the lease UPDATE and the columns the claim
returns): each is written once in `parts/` under its own why-header and placed by a whole line
`-- include: parts/<name>.sql` where the statement needs it, indented as that line (a part may
include another). The statement file keeps its shape: every CTE is named in it, only bodies
and clauses come from parts, so the file plus the parts it names reads as the statement
PostgreSQL runs; `statement(name)` prints it as sent, for EXPLAIN. The expansion happens when
the statement is first loaded (then cached); a missing part, a misspelt directive or a part
including itself raises there, never a statement with a hole.

What is sent to PostgreSQL is the expanded file without its whole-line comments and blank lines,
but with its first line, which names the statement (`-- name: claim`, `-- emit_insert_one: ...`)
in server logs, pg_stat_activity and the tests' captured queries. The comments are for the
reader; sent, they would cost on every call: psycopg caches the conversion of a query's
`%(name)s` placeholders only for texts up to 4,096 bytes, and `emit_insert_one.sql` with its
header was 4,459 (re-parsed on every emit, about a fifth of an emit's client time). No
statement has a multi-line quoted string, so a line that starts with `--` is a comment; a
statement with a dollar-quoted body (a function definition, whose comments are part of the
function) is sent as written. A test checks both.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent
PARTS_DIR = SQL_DIR / "parts"
DOLLAR_QUOTE = re.compile(r"\$[A-Za-z_]*\$")
INCLUDE = re.compile(r"^[ \t]*-- include: parts/(?P<part>[a-z_]+)\.sql[ \t]*$")
INCLUDE_LIKE = re.compile(r"^[ \t]*--[ \t]*include\b", re.IGNORECASE | re.MULTILINE)


@cache
def statement(name: str) -> str:
    """The statement of `<name>.sql` as sent: its naming first line, then its SQL lines."""
    path = SQL_DIR / f"{name}.sql"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SQL_DIR.glob("*.sql")))
        raise LookupError(f"no SQL statement named {name!r} in {SQL_DIR}; known: {known}")
    text = with_parts(path)
    return text if DOLLAR_QUOTE.search(text) else without_comment_lines(text)


def with_parts(path: Path, parts: Path = PARTS_DIR, within: tuple[Path, ...] = ()) -> str:
    """The text of `path` with each `-- include: parts/<name>.sql` line replaced by that file of
    `parts`, every line of it indented as the include line (its own includes expanded too)."""
    text = path.read_text(encoding="utf-8")
    if not INCLUDE_LIKE.search(text):
        return text
    lines: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not INCLUDE_LIKE.match(line):
            lines.append(line)
            continue
        where = f"{path.parent.name}/{path.name}:{number}"
        part = included(line, where, parts, (*within, path))
        indent = line[: len(line) - len(line.lstrip())]
        lines += [indent + kept if kept.strip() else kept for kept in part.splitlines()]
    return "\n".join(lines) + "\n"


def included(line: str, where: str, parts: Path, within: tuple[Path, ...]) -> str:
    """The expanded part an include line names; raises if the line or its part is wrong."""
    match = INCLUDE.match(line)
    if match is None:
        raise ValueError(
            f"{where}: not an include directive ('-- include: parts/<name>.sql'): {line.strip()!r}"
        )
    part = parts / f"{match['part']}.sql"
    if not part.is_file():
        known = ", ".join(sorted(p.stem for p in parts.glob("*.sql")))
        raise LookupError(
            f"{where} includes parts/{part.name}, which does not exist; parts: {known}"
        )
    if part in within:
        raise ValueError(f"{where}: parts/{part.name} includes itself")
    return with_parts(part, parts, within)


def without_comment_lines(text: str) -> str:
    """`text` without whole-line comments and blank lines, keeping its first line (the name)."""
    lines = text.splitlines()
    kept = lines[:1]
    kept += [line for line in lines[len(kept) :] if line.strip() and not is_comment(line)]
    return "\n".join(kept) + "\n"


def is_comment(line: str) -> bool:
    return line.lstrip().startswith("--")
