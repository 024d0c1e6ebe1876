"""The lag guard: is the replica close enough behind the primary to serve a read?

Measured at most once per `CHECK_INTERVAL` per process, by comparing positions rather than
trusting the replay timestamp alone: `pg_last_xact_replay_timestamp()` is the commit time of the
last transaction replayed, so on an idle primary it grows old while nothing is missing. The
replica is caught up when it has replayed the WAL the primary had flushed just before
(`pg_current_wal_flush_lsn()`, read first); otherwise its lag is the age of its last replayed
commit, which on a busy primary is what it is behind. A disconnected standby (its receiver down)
is not caught up either, so it ages past the limit like a slow one.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from django.db import DatabaseError, connections

from core.replica.conf import ALIAS, PRIMARY, replica_settings

logger = logging.getLogger(__name__)

# On the primary, first: the WAL a caught-up replica must have replayed.
PRIMARY_POSITION_SQL = "SELECT pg_current_wal_flush_lsn()"
# On the replica: a standby at all; caught up with that position; else how old its last replay is.
REPLICA_LAG_SQL = """
SELECT pg_is_in_recovery(),
       pg_last_wal_replay_lsn() >= %(primary_position)s::pg_lsn,
       EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8
"""


@dataclass(frozen=True)
class Verdict:
    """One measurement: whether reads may use the replica, and why (for the log)."""

    usable: bool
    reason: str
    lag: float | None = None


def measure() -> Verdict:
    """Measure the replica now (a query on each server); never raises a database error."""
    try:
        with connections[PRIMARY].cursor() as cursor:
            cursor.execute(PRIMARY_POSITION_SQL)
            [primary_position] = cursor.fetchone()
    except DatabaseError as error:
        return Verdict(False, f"the primary's WAL position is unreadable: {first_line(error)}")
    try:
        with connections[ALIAS].cursor() as cursor:
            cursor.execute(REPLICA_LAG_SQL, {"primary_position": primary_position})
            standby, caught_up, age = cursor.fetchone()
    except DatabaseError as error:
        _close_quietly()
        return Verdict(False, f"unreachable: {first_line(error)}")
    if not standby:
        return Verdict(False, "not a standby (pg_is_in_recovery() is false)")
    lag = 0.0 if caught_up else (math.inf if age is None else max(float(age), 0.0))
    limit = replica_settings.MAX_LAG
    if lag > limit:
        return Verdict(
            False, f"replay lag {lag:.1f} s is over DATABASE_REPLICA_MAX_LAG={limit:g}", lag
        )
    return Verdict(True, f"replay lag {lag:.1f} s", lag)


class LagGuard:
    """The process's last verdict, trusted for CHECK_INTERVAL; logs when usability changes."""

    def __init__(self) -> None:
        self.verdict: Verdict | None = None
        self.checked_at = -math.inf

    def usable(self) -> bool:
        """Whether reads may go to the replica now (measuring again when the verdict is old)."""
        if time.monotonic() - self.checked_at >= replica_settings.CHECK_INTERVAL:
            self.record(measure())
        return self.verdict is not None and self.verdict.usable

    def record(self, verdict: Verdict) -> None:
        previous, self.verdict, self.checked_at = self.verdict, verdict, time.monotonic()
        if previous is not None and previous.usable == verdict.usable:
            return
        if verdict.usable:
            logger.info("read replica in use: %s", verdict.reason)
        else:
            logger.warning("read replica not used, reads go to the primary: %s", verdict.reason)

    def replica_failed(self, error: Exception) -> None:
        """A query on the replica failed mid-request: unusable until the next measurement."""
        _close_quietly()
        self.record(Verdict(False, f"a query failed: {first_line(error)}"))

    def forget(self) -> None:
        """Measure again on the next read (tests; after reconfiguring)."""
        self.verdict, self.checked_at = None, -math.inf


guard = LagGuard()


def first_line(error: Exception) -> str:
    """The first line of a database error (libpq's messages run over several)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _close_quietly() -> None:
    try:
        connections[ALIAS].close()
    except DatabaseError:
        logger.debug("closing the broken replica connection failed", exc_info=True)
