"""The admin's Job queues page: per queue, queued, delayed, running and failed messages, read
from the Postgres broker's table; django_dramatiq's always-empty Tasks list is gone."""

from __future__ import annotations

import uuid

import pytest
from django.contrib import admin
from django.db import connection
from django.test import Client
from django_dramatiq.models import Task

from jobs import queues
from tests.support.admin import staff

pytestmark = pytest.mark.django_db
PAGE = "/admin/jobs/queues/"

INSERT_SQL = """
INSERT INTO dramatiq.queue (message_id, queue_name, state, message, available_at)
VALUES (%s, %s, %s::dramatiq.state, '{}'::jsonb, now() + make_interval(secs => %s))
"""


def put(queue: str, state: str, *, due_in: float = -1.0) -> None:
    with connection.cursor() as cursor:
        cursor.execute(INSERT_SQL, [uuid.uuid4(), queue, state, due_in])


@pytest.fixture
def messages() -> None:
    put("default", "queued")
    put("default", "queued")
    put("default", "queued", due_in=600)  # not due yet
    put("default.DQ", "queued", due_in=30)  # in the delay queue
    put("default", "consumed")
    put("default", "rejected")
    put("webhooks", "queued")


def test_figures_per_queue(messages: None) -> None:
    found = {q.queue: q for q in queues.queue_figures() or []}
    assert set(found) == {"default", "webhooks"}
    default = found["default"]
    assert (default.queued, default.delayed, default.running, default.failed) == (2, 2, 1, 1)
    assert default.oldest_due is not None
    assert (found["webhooks"].queued, found["webhooks"].failed) == (1, 0)


def test_the_page_shows_them_to_who_may_view_job_runs(client: Client, messages: None) -> None:
    client.force_login(staff("ops", "jobs.view_jobrun"))
    html = client.get(PAGE).content.decode()
    assert 'id="job-queues"' in html and "webhooks" in html
    assert '<td class="num dc-bad">1</td>' in html  # default's failed message
    assert "Job queues" in client.get("/admin/").content.decode()


def test_without_the_permission_the_page_is_refused(client: Client) -> None:
    client.force_login(staff("nobody"))
    assert client.get(PAGE).status_code == 403


def test_an_empty_broker_says_so(client: Client) -> None:
    client.force_login(staff("ops", "jobs.view_jobrun"))
    assert 'id="queues-empty"' in client.get(PAGE).content.decode()


def test_the_django_dramatiq_tasks_list_is_not_offered() -> None:
    assert not admin.site.is_registered(Task)
