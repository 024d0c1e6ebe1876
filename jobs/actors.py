"""The scheduled jobs as dramatiq actors (discovered by `manage.py rundramatiq`): one per job,
named after it, all on the `jobs` queue."""

from __future__ import annotations

import functools

from jobs.registry import JOBS_QUEUE, declare_actor, jobs, run_scheduled

JOB_TIME_LIMIT_MS = 60 * 60 * 1000  # an archive catching up can take long; runs are per slot

ACTORS = {
    job.name: declare_actor(
        job.name,
        functools.partial(run_scheduled, job.name),
        queue_name=JOBS_QUEUE,
        max_retries=0,  # per message: the job's ATTEMPTS setting, read when it is enqueued
        time_limit=JOB_TIME_LIMIT_MS,
    )
    for job in jobs.all()
}
