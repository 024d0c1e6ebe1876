"""The schedules and job runs admin: registered jobs only, by name with their next run, "Run
now" on every row and on the schedule's page through our runner, slots in the console's format."""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from typing import Any

import pytest
import time_machine
from django.test import Client
from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

from core.models import AuditLog
from jobs import schedules
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


NOW = dt.datetime(2026, 3, 2, 12, 0, 30, tzinfo=dt.UTC)  # a Monday


def schedule_at(name: str, *, zone: str, **fields: Any) -> PeriodicTask:
    crontab, _ = CrontabSchedule.objects.get_or_create(
        minute="0", hour="3", day_of_week="*", day_of_month="*", month_of_year="*",
        timezone=zoneinfo.ZoneInfo(zone),
    )  # fmt: skip
    return PeriodicTask.objects.create(name=name, task="dlq-alert", crontab=crontab, **fields)


def test_schedules_are_listed_by_name_with_their_next_run_in_their_own_zone(
    operator: Client,
) -> None:
    schedule_at("aa nightly in sao paulo", zone="America/Sao_Paulo")
    schedule_at("ab nightly in utc", zone="UTC")
    schedule_at("ac switched off", zone="UTC", enabled=False)
    with time_machine.travel(NOW, tick=False):
        page = operator.get(LIST_URL).content.decode()
    names = re.findall(r'<th class="field-name"><a [^>]*>([^<]+)</a>', page)
    assert names == sorted(names) and names[:3] == [
        "aa nightly in sao paulo",
        "ab nightly in utc",
        "ac switched off",
    ]
    # 03:00 in Sao Paulo is 06:00 UTC, the console's zone; 03:00 UTC has passed today.
    assert (
        '<time class="dc-next-run" datetime="2026-03-03T06:00:00+00:00" '
        'title="2026-03-03 06:00:00 UTC = 2026-03-03 03:00:00 America/Sao_Paulo">in 17 h</time>'
    ) in page
    assert (
        '<time class="dc-next-run" datetime="2026-03-03T03:00:00+00:00" '
        'title="2026-03-03 03:00:00 UTC">in 14 h</time>'
    ) in page
    assert '<td class="field-next_run"><span class="dc-muted">disabled</span></td>' in page


def test_next_run_follows_the_scheduler(db: None) -> None:
    every_minute = IntervalSchedule.objects.create(every=60, period="seconds")
    task = PeriodicTask(name="t", task="dlq-alert", interval=every_minute)
    with time_machine.travel(NOW, tick=False):
        assert schedules.next_run(task).at == NOW + dt.timedelta(seconds=60)  # never ran
        task.last_run_at = NOW - dt.timedelta(seconds=20)
        assert schedules.next_run(task).at == NOW + dt.timedelta(seconds=40)
        task.last_run_at = NOW - dt.timedelta(minutes=5)
        late = schedules.next_run(task)
        assert (late.at, late.due) == (NOW, True)  # missed: fired on the next tick
        task.one_off, task.total_run_count = True, 1
        assert schedules.next_run(task).why == "ran once (one-off)"


def test_run_now_is_a_button_on_every_row_and_on_the_schedules_page(operator: Client) -> None:
    pk = pk_of("dlq-alert")
    run_now = f"{LIST_URL}{pk}/run-now/"
    page = operator.get(LIST_URL).content.decode()
    assert page.count('class="button dc-run-now"') == PeriodicTask.objects.count()
    assert f'formaction="{run_now}"' in page
    detail = operator.get(f"{LIST_URL}{pk}/change/").content.decode()
    assert f'action="{run_now}"' in detail and 'name="from" value="change"' in detail

    assert operator.get(run_now).status_code == 405
    answer = operator.post(run_now)
    assert answer.status_code == 302 and answer["Location"] == LIST_URL
    again = operator.post(run_now, {"from": "change"}, follow=True)
    assert again.redirect_chain[-1][0] == f"{LIST_URL}{pk}/change/"
    assert "Schedule dlq-alert: job dlq-alert <a href=" in again.content.decode()
    assert JobRun.objects.filter(job="dlq-alert", trigger="admin").count() == 2
    assert AuditLog.objects.filter(action="job.run_now", actor="user:ops").count() == 2

    viewer = Client()
    viewer.force_login(staff("viewer", "django_celery_beat.view_periodictask"))
    assert viewer.post(run_now).status_code == 403
    assert "dc-run-now" not in viewer.get(LIST_URL).content.decode()  # nothing it may press


def test_job_run_slots_read_in_the_consoles_format(operator: Client) -> None:
    JobRun.objects.create(
        job="dlq-alert",
        slot="2026-03-02T12:00:00+00:00",
        trigger="schedule",
        status="completed",
        started_at=NOW,
    )
    page = operator.get("/admin/jobs/jobrun/").content.decode()
    assert "2026-03-02 12:00:00 UTC" in page and "2026-03-02T12:00:00+00:00" not in page


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
    ui.find("#result_list button.dc-run-now").click()  # the row's own button, no action menu
    ui.wait_for_text("job dlq-alert completed: 0 rows in")
    assert ui.driver.current_url.endswith(LIST_URL)
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
