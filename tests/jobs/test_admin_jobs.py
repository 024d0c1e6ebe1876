"""The schedules and job runs admin: registered jobs only, "Run now" through our runner."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from core.models import AuditLog
from jobs.models import JobRun
from tests.support.admin import staff
from tests.support.browser import Console

PASSWORD = "pw-Console-1"
SCHEDULER_OPERATOR = (
    "django_celery_beat.view_periodictask",
    "django_celery_beat.change_periodictask",
    "django_celery_beat.add_periodictask",
    "jobs.view_jobrun",
)
ADD_URL = "/admin/django_celery_beat/periodictask/add/"
LIST_URL = "/admin/django_celery_beat/periodictask/"


@pytest.fixture
def operator(db: None) -> Client:
    client = Client()
    client.force_login(staff("ops", *SCHEDULER_OPERATOR, password=PASSWORD))
    return client


def add_form(**fields: str) -> dict[str, str]:
    interval, _ = IntervalSchedule.objects.get_or_create(every=10, period="minutes")
    return {
        "name": "my schedule",
        "enabled": "on",
        "interval": str(interval.pk),
        "args": "[]",
        "kwargs": "{}",
        "description": "",
        **fields,
    }


def test_the_registered_jobs_are_the_choices(operator: Client) -> None:
    page = operator.get(ADD_URL).content.decode()
    for name in ("backup", "dlq-alert", "event-log-reaper", "restore-check"):
        assert f'<option value="{name}">{name}</option>' in page


def test_an_unknown_job_name_is_refused_by_the_form(operator: Client) -> None:
    response = operator.post(ADD_URL, add_form(task="dlq-alret"))
    assert response.status_code == 200
    assert "Unknown job &#x27;dlq-alret&#x27;. Registered jobs:" in response.content.decode()
    assert not PeriodicTask.objects.filter(name="my schedule").exists()


def test_a_registered_job_saves(operator: Client) -> None:
    response = operator.post(ADD_URL, add_form(regtask="dlq-alert"))
    assert response.status_code == 302
    assert PeriodicTask.objects.get(name="my schedule").task == "dlq-alert"


def test_each_schedule_shows_its_last_run(operator: Client) -> None:
    operator.post(LIST_URL, {"action": "run_now", "_selected_action": [pk_of("dlq-alert")]})
    page = operator.get(LIST_URL).content.decode()
    run = JobRun.objects.get(job="dlq-alert")
    assert f'/admin/jobs/jobrun/{run.pk}/change/">completed</a>' in page
    assert f"{run.duration_ms} ms" in page and "never run" in page


def test_job_runs_are_read_only_and_filterable(operator: Client) -> None:
    operator.post(LIST_URL, {"action": "run_now", "_selected_action": [pk_of("dlq-alert")]})
    run = JobRun.objects.get()
    page = operator.get("/admin/jobs/jobrun/?job=dlq-alert&status=completed").content
    assert str(run.pk).encode() in page
    assert str(run.pk).encode() not in operator.get("/admin/jobs/jobrun/?job=backup").content
    detail = operator.get(f"/admin/jobs/jobrun/{run.pk}/change/").content.decode()
    assert 'name="_save"' not in detail and "admin" in detail


def pk_of(name: str) -> str:
    return str(PeriodicTask.objects.get(name=name).pk)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_run_now_in_a_real_browser(browser: Any, live_server: Any) -> None:
    staff("ops", *SCHEDULER_OPERATOR, password=PASSWORD)
    ui = Console(browser, live_server.url)
    ui.open("/admin/login/")
    ui.find("#id_username").send_keys("ops")
    ui.find("#id_password").send_keys(PASSWORD)
    ui.find("input[type=submit]").click()
    ui.wait_for_text("Periodic tasks")

    ui.open(f"{LIST_URL}?q=dlq-alert")
    ui.wait_for_text("never run")
    ui.shot("21-schedules")
    ui.run_action("run_now")
    ui.wait_for_text("job dlq-alert completed: 0 rows in")
    ui.shot("22-run-now")

    run = JobRun.objects.get(job="dlq-alert")
    assert (run.trigger, run.status) == ("admin", "completed")
    entry = AuditLog.objects.get(action="job.run_now")
    assert (entry.actor, entry.target_id, entry.details["status"]) == (
        "user:ops",
        "dlq-alert",
        "completed",
    )
    ui.click_link("completed", within="#result_list")
    ui.wait_for_text(str(run.pk))
    ui.shot("23-job-run")
