"""The job queues as operators read them: per queue, what waits, what is delayed, what runs and
what failed, from the Postgres broker's own table (`dramatiq.queue`, dramatiq-postgres).

Acknowledged messages are deleted from that table at once, so it holds only live and rejected
messages (rejected ones are purged after 30 days): one aggregate over it is cheap.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db import connection

# -- name: queue_figures --
# -- description: per queue (a delayed message sits in "<queue>.DQ" until due, dramatiq's way),
#    the messages queued and due, delayed (in the delay queue or not yet due), being consumed,
#    and rejected (failed for good), with the oldest due message's age.
QUEUE_FIGURES_SQL = """
SELECT regexp_replace(queue_name, '\\.DQ$', '') AS queue,
       count(*) FILTER (WHERE state = 'queued' AND queue_name NOT LIKE '%%.DQ'
                          AND available_at <= now()) AS queued,
       count(*) FILTER (WHERE state = 'queued' AND (queue_name LIKE '%%.DQ'
                          OR available_at > now())) AS delayed,
       count(*) FILTER (WHERE state = 'consumed') AS running,
       count(*) FILTER (WHERE state = 'rejected') AS failed,
       min(available_at) FILTER (WHERE state = 'queued' AND queue_name NOT LIKE '%%.DQ'
                                   AND available_at <= now()) AS oldest_due
  FROM dramatiq.queue
 GROUP BY 1
 ORDER BY 1
"""
TABLE_EXISTS_SQL = "SELECT to_regclass('dramatiq.queue') IS NOT NULL"


@dataclass(frozen=True)
class QueueFigures:
    queue: str
    queued: int
    delayed: int
    running: int
    failed: int
    oldest_due: dt.datetime | None


def queue_figures() -> list[QueueFigures] | None:
    """Each queue's figures; None when the database has no Postgres broker table."""
    with connection.cursor() as cursor:
        cursor.execute(TABLE_EXISTS_SQL)
        (exists,) = cursor.fetchone()
        if not exists:
            return None
        cursor.execute(QUEUE_FIGURES_SQL)
        return [QueueFigures(*row) for row in cursor.fetchall()]
