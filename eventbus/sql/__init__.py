"""Named SQL statements of the bus, one complete statement per `.sql` file in this folder.

Each file is a whole statement under a header comment (what it does and why it is shaped so),
loaded by its file name: `statement("claim")` is `claim.sql`. Nothing is assembled from
fragments; migrations apply frozen copies of function definitions, never these live files.

What is sent to PostgreSQL is the file without its whole-line comments and blank lines, but with
its first line, which names the statement (`-- name: claim`, `-- emit_insert_one: ...`) in server
logs, pg_stat_activity and the tests' captured queries. The comments are for the reader; sent,
they would cost on every call: psycopg caches the conversion of a query's `%(name)s`
placeholders only for texts up to 4,096 bytes, and `emit_insert_one.sql` with its header was
4,459 (re-parsed on every emit, about a fifth of an emit's client time). No statement has a
multi-line quoted string, so a line that starts with `--` is a comment; a statement with a
dollar-quoted body (a function definition, whose comments are part of the function) is sent as
written. A test checks both.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent
DOLLAR_QUOTE = re.compile(r"\$[A-Za-z_]*\$")


@cache
def statement(name: str) -> str:
    """The statement of `<name>.sql` as sent: its naming first line, then its SQL lines."""
    path = SQL_DIR / f"{name}.sql"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in SQL_DIR.glob("*.sql")))
        raise LookupError(f"no SQL statement named {name!r} in {SQL_DIR}; known: {known}") from None
    return text if DOLLAR_QUOTE.search(text) else without_comment_lines(text)


def without_comment_lines(text: str) -> str:
    """`text` without whole-line comments and blank lines, keeping its first line (the name)."""
    lines = text.splitlines()
    kept = lines[:1]
    kept += [line for line in lines[len(kept) :] if line.strip() and not is_comment(line)]
    return "\n".join(kept) + "\n"


def is_comment(line: str) -> bool:
    return line.lstrip().startswith("--")
