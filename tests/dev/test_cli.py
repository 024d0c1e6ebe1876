"""dev/cli.py: what a local `run` sets for the product's processes."""

from __future__ import annotations

import pytest

from dev.cli import allow_loopback_webhooks, mock_ai_by_default


def test_a_local_run_allows_loopback_webhook_targets_and_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    env: dict[str, str] = {}
    allow_loopback_webhooks(env)
    assert env["WEBHOOKS_ALLOW_PRIVATE_TARGETS"] == "true"
    assert "WEBHOOKS_ALLOW_PRIVATE_TARGETS=true" in capsys.readouterr().err


def test_an_explicit_setting_is_kept_without_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "false"}
    allow_loopback_webhooks(env)
    assert env == {"WEBHOOKS_ALLOW_PRIVATE_TARGETS": "false"}
    assert capsys.readouterr().err == ""


def test_run_turns_the_ai_fixtures_on_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    env: dict[str, str] = {}
    mock_ai_by_default(env)
    assert env["MOCK_AI"] == "true"
    assert "MOCK_AI=true" in capsys.readouterr().err


@pytest.mark.parametrize("given", [{"MOCK_AI": "false"}, {"AI_API_KEY": "sk-real"}])
def test_run_keeps_a_configured_model(given: dict[str, str]) -> None:
    env = dict(given)
    mock_ai_by_default(env)
    assert env == given


def test_the_processes_get_the_owner_url_and_each_roles_url() -> None:
    from dev.cli import database_env
    from dev.postgres import Database

    urls = {"DATABASE_WORKER_URL": "postgres://w@h/d", "DATABASE_WEB_URL": "postgres://b@h/d"}
    env = database_env(Database("postgres://o@h/d", None, urls))
    assert (env["DATABASE_URL"], env["DATABASE_WORKER_URL"], env["DATABASE_WEB_URL"]) == (
        "postgres://o@h/d",
        *urls.values(),
    )


def test_with_a_database_url_of_its_own_the_environment_names_the_roles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dev.cli import database_env
    from dev.postgres import Database

    monkeypatch.setenv("DATABASE_WEB_URL", "postgres://mine@h/d")
    monkeypatch.delenv("DATABASE_WORKER_URL", raising=False)
    env = database_env(Database("postgres://o@h/d"))
    assert env["DATABASE_WEB_URL"] == "postgres://mine@h/d" and "DATABASE_WORKER_URL" not in env


def test_the_suite_runs_on_two_workers_per_cpu_with_its_groups_kept_together() -> None:
    from dev.cli import pytest_args

    assert pytest_args([], 2) == ["-n", "4", "--dist", "loadgroup"]
    assert pytest_args(["-k", "claim", "-x"], 1) == [
        "-n",
        "2",
        "--dist",
        "loadgroup",
        "-k",
        "claim",
        "-x",
    ]


@pytest.mark.parametrize("given", [["-n", "0"], ["-n0"], ["--numprocesses=3"], ["-n", "auto"]])
def test_a_chosen_number_of_workers_is_kept(given: list[str]) -> None:
    from dev.cli import pytest_args

    assert pytest_args(given, 2) == ["--dist", "loadgroup", *given]


@pytest.mark.parametrize(
    "given", [["--pdb"], ["--trace"], ["-p", "no:xdist"], ["-n", "2", "--dist", "load"]]
)
def test_a_debugger_or_an_own_distribution_is_left_alone(given: list[str]) -> None:
    from dev.cli import pytest_args

    assert pytest_args(given, 2)[-len(given) :] == given
    assert "loadgroup" not in pytest_args(given, 2)
