"""The jobs' metrics on `/metrics`: the job queue's size and each job's last outcome."""

from __future__ import annotations

from collections.abc import Iterator

from django.conf import settings
from django.db import connection
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from jobs.registry import jobs

JOB_QUEUE_SQL = """
SELECT queue_name, count(*) FROM dramatiq.queue WHERE state = 'queued' GROUP BY queue_name
"""

LAST_RUNS_SQL = """
SELECT j.name, last.status, ok.finished_at, last.rows_processed
  FROM unnest(%(jobs)s::text[]) AS j(name)
  LEFT JOIN LATERAL (
        SELECT status, rows_processed FROM deskcomm_jobrun r
         WHERE r.job = j.name AND r.status <> 'running'
         ORDER BY r.started_at DESC LIMIT 1) last ON true
  LEFT JOIN LATERAL (
        SELECT finished_at FROM deskcomm_jobrun r WHERE r.job = j.name AND r.status = 'completed'
         ORDER BY r.started_at DESC LIMIT 1) ok ON true
"""


class JobsCollector(Collector):
    """The job queue's size (Postgres broker in this database) and each job's last outcome."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if settings.JOBS_BROKER == "postgres" and not settings.JOBS_BROKER_DATABASE_URL:
            yield self._queue()
        yield from self._last_runs()

    def _queue(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily(
            "deskcomm_jobs_queue_messages",
            "Messages waiting in the job broker, per queue (Postgres broker).",
            labels=["queue"],
        )
        with connection.cursor() as cursor:
            cursor.execute(JOB_QUEUE_SQL)
            for queue, count in cursor.fetchall():
                family.add_metric([queue], count)
        return family

    def _last_runs(self) -> Iterator[GaugeMetricFamily]:
        failed = GaugeMetricFamily(
            "deskcomm_jobs_last_run_failed",
            "1 when the job's newest finished run failed, else 0.",
            labels=["job"],
        )
        success = GaugeMetricFamily(
            "deskcomm_jobs_last_success_timestamp_seconds",
            "When the job last completed (Unix time; absent if it never has).",
            labels=["job"],
        )
        # seed 001 A15: recover-stuck-messages reprocessing more than 100 messages in a run.
        rows = GaugeMetricFamily(
            "deskcomm_jobs_last_run_rows",
            "Rows the job's newest finished run processed (absent if it reported none).",
            labels=["job"],
        )
        with connection.cursor() as cursor:
            cursor.execute(LAST_RUNS_SQL, {"jobs": jobs.names()})
            for name, status, finished_at, processed in cursor.fetchall():
                failed.add_metric([name], 1 if status == "failed" else 0)
                if finished_at is not None:
                    success.add_metric([name], finished_at.timestamp())
                if processed is not None:
                    rows.add_metric([name], processed)
        yield failed
        yield success
        yield rows
