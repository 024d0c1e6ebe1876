"""The libpq `options` that carry a role's server-side timeouts (`-c name=<ms>` flags).

Pure string work with no Django import: the settings module builds every connection's options with
it, and core.pooler a direct connection's; core.db_timeouts applies them to a process.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

TIMEOUTS = ("statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout")
_TIMEOUT_FLAG = re.compile(r"-c\s*(?:" + "|".join(TIMEOUTS) + r")=\S*")


def with_timeouts(options: str, timeouts: Mapping[str, float]) -> str:
    """libpq `options` carrying `timeouts` (seconds) as `-c name=<milliseconds>` flags; other
    flags (from DATABASE_URL) are kept, earlier timeout flags replaced."""
    kept = " ".join(_TIMEOUT_FLAG.sub("", options).split())
    flags = [f"-c {name}={round(seconds * 1000)}" for name, seconds in timeouts.items()]
    return " ".join([kept, *flags] if kept else flags)
