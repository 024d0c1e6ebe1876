"""Named SQL statements of the bus, one complete statement per `.sql` file in this folder.

Each file is a whole statement under a header comment (what it does and why it is shaped so),
loaded by its file name: `statement("claim")` is `claim.sql`. Nothing is assembled from
fragments; migrations apply frozen copies of function definitions, never these live files.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parent


@cache
def statement(name: str) -> str:
    """The text of `<name>.sql` (header comment included: PostgreSQL ignores it)."""
    path = SQL_DIR / f"{name}.sql"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        known = ", ".join(sorted(p.stem for p in SQL_DIR.glob("*.sql")))
        raise LookupError(f"no SQL statement named {name!r} in {SQL_DIR}; known: {known}") from None
