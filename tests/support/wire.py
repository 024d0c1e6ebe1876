"""Count what a block of code sends to PostgreSQL on Django's connection, at the wire.

`CaptureQueriesContext` sees what Django logs; this sees every message libpq sends (its trace,
`PQtrace`): statements Django never logs (a connection health check, psycopg's DEALLOCATE after
a rollback, `set_config` from a raw cursor) count too. The query-count budget tests use it so a
hot path that grows a statement or a round trip fails the suite without timing anything.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
from django.db import connection
from psycopg import pq


@dataclass
class Wire:
    """The frontend messages of one traced block, in order."""

    messages: list[str] = field(default_factory=list)
    prepared: dict[str, str] = field(default_factory=dict)  # statement name -> its text

    @property
    def statements(self) -> list[str]:
        """Each statement run: a simple Query's text, or the text Parse-d for an Execute (the
        name of a statement prepared earlier when it was not parsed in this block)."""
        parsed = {f'"{name}"': f'"{text}"' for name, text in self.prepared.items()}
        pending = ""
        found: list[str] = []
        for line in self.messages:
            kind, _, rest = line.partition("\t")
            if kind == "Query":
                found.append(rest.strip().strip('"').strip())
            elif kind == "Parse":
                name, _, text = rest.strip().partition(" ")
                parsed[name] = text.strip()
            elif kind == "Bind":
                parts = rest.strip().split(" ")
                statement_name = parts[1] if len(parts) > 1 else '""'
                pending = parsed.get(statement_name, f"prepared {statement_name}")
            elif kind == "Execute":
                found.append(pending.strip('"').strip())
        return found

    @property
    def round_trips(self) -> int:
        """Requests that wait for the server: each simple Query, each Sync (a pipeline's
        statements share the Sync that ends them)."""
        return sum(1 for m in self.messages if m.split("\t", 1)[0] in ("Query", "Sync"))

    def named(self) -> list[str]:
        """The bus's named statements run (the first line of each, `-- name ...:` stripped)."""
        return [_name_of(s) for s in self.statements]


def _name_of(text: str) -> str:
    first = text.splitlines()[0] if text else ""
    if first.startswith("-- "):
        return first[3:].removeprefix("name: ").split(":", 1)[0].strip()
    return first


@contextmanager
def traced() -> Iterator[Wire]:
    """Trace Django's default connection (opened first if need be) for the block."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    wire = Wire()
    with tempfile.TemporaryFile("w+") as out:
        pgconn.trace(out.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield wire
        finally:
            pgconn.untrace()
            out.flush()
            os.fsync(out.fileno())
            out.seek(0)
            wire.messages = _frontend_messages(out.read())
            wire.prepared = _prepared_statements(connection.connection)


def _prepared_statements(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """psycopg's names of the statements it prepared on `conn` (its private cache: test-only)."""
    names = conn._prepared._names
    return {name.decode(): key[0].decode() for key, name in names.items()}


def _frontend_messages(trace: str) -> list[str]:
    """`F <length> <Message> <fields>` entries of the trace, as `<Message>\t<fields>` (a field
    that spans lines, such as a statement's text, continues on the lines that follow)."""
    messages: list[str] = []
    frontend = False
    for line in trace.splitlines():
        parts = line.split("\t", 3)
        if len(parts) >= 3 and parts[0] in ("F", "B") and parts[1].isdigit():
            frontend = parts[0] == "F"
            if frontend:
                messages.append(parts[2] + ("\t" + parts[3] if len(parts) > 3 else ""))
        elif frontend and messages:
            messages[-1] += "\n" + line
    return messages
