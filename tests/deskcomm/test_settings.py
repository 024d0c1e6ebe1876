"""Every environment setting the code reads is documented in `.env.example`."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT_PACKAGES = ("deskcomm", "core", "jobs", "crm", "eventbus", "webhooks", "lgpd")
ENV_READ = re.compile(r"""env(?:\.\w+)?\(\s*["']([A-Z][A-Z0-9_]+)["']""")


def documented() -> set[str]:
    lines = (REPO / ".env.example").read_text().splitlines()
    return {line.split("=", 1)[0] for line in lines if re.match(r"^[A-Z][A-Z0-9_]*=", line)}


def test_every_setting_is_in_env_example() -> None:
    read = set(ENV_READ.findall((REPO / "deskcomm" / "settings.py").read_text()))
    assert read, "the pattern no longer finds env reads in settings.py"
    assert read - documented() == set()


def test_the_job_broker_follows_the_environment() -> None:

    from jobs.broker_config import BrokerConfigError, choose_backend, dramatiq_broker

    assert choose_backend(explicit="", redis_url="", rabbitmq_url="") == "postgres"
    assert choose_backend(explicit="", redis_url="redis://r:6379", rabbitmq_url="") == "redis"
    assert choose_backend(explicit="", redis_url="", rabbitmq_url="amqp://q") == "rabbitmq"
    assert (
        choose_backend(explicit="redis", redis_url="redis://r", rabbitmq_url="amqp://q") == "redis"
    )
    with pytest.raises(BrokerConfigError, match="choose one with JOBS_BROKER"):
        choose_backend(explicit="", redis_url="redis://r", rabbitmq_url="amqp://q")
    with pytest.raises(BrokerConfigError, match="JOBS_BROKER must be one of"):
        choose_backend(explicit="kafka", redis_url="", rabbitmq_url="")
    redis = dramatiq_broker(backend="redis", redis_url="", rabbitmq_url="", postgres_url="")
    assert redis["OPTIONS"] == {"url": "redis://localhost:6379"}  # seed 004 default
    postgres = dramatiq_broker(backend="postgres", redis_url="", rabbitmq_url="", postgres_url="")
    assert postgres["BROKER"] == "jobs.brokers.PostgresBroker"
    assert "django_dramatiq.middleware.DbConnectionsMiddleware" in postgres["MIDDLEWARE"]


def test_every_documented_setting_is_read_somewhere_and_listed_once() -> None:
    names = [
        line.split("=", 1)[0]
        for line in (REPO / ".env.example").read_text().splitlines()
        if re.match(r"^[A-Z][A-Z0-9_]*=", line)
    ]
    assert sorted({n for n in names if names.count(n) > 1}) == []
    code = (
        "\n".join(
            path.read_text()
            for folder in PRODUCT_PACKAGES
            for path in (REPO / folder).rglob("*.py")
        )
        + (REPO / "gunicorn.conf.py").read_text()
    )
    # The compose files' own variables (the last section): read there, as ${NAME...}.
    compose = "".join(path.read_text() for path in REPO.glob("docker-compose*.yml"))
    code += "".join(f'"{name}"' for name in re.findall(r"\$\{(\w+)", compose))
    unread = {n for n in names if f'"{n}"' not in code and f"'{n}'" not in code}
    assert unread == set(), "documented in .env.example but read nowhere"


def test_every_storage_alias_the_code_uses_exists_in_the_unmodified_settings() -> None:
    import subprocess
    import sys

    code = "\n".join(
        path.read_text() for folder in PRODUCT_PACKAGES for path in (REPO / folder).rglob("*.py")
    )
    used = set(re.findall(r"""storages\[["'](\w+)["']\]""", code))
    used |= set(re.findall(r"""STORAGE_ALIAS = ["'](\w+)["']""", code))
    assert {"archive", "backups", "lgpd_exports"} <= used
    # A fresh interpreter: settings.py as it is, with no test fixture adding anything.
    listed = subprocess.run(
        [sys.executable, "-c", "import deskcomm.settings as s; print(' '.join(s.STORAGES))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert used <= set(listed), sorted(used - set(listed))


KNOB_DICTS = ("API", "EVENTBUS", "WEBHOOKS", "LGPD")


def test_the_app_knob_dicts_carry_only_what_the_environment_sets() -> None:
    import json
    import os
    import subprocess
    import sys

    read = set(ENV_READ.findall((REPO / "deskcomm" / "settings.py").read_text()))
    env = {name: value for name, value in os.environ.items() if name not in read}
    env |= {"EVENTBUS_MAX_ATTEMPTS": "3", "WEBHOOKS_ALLOW_HTTP": "true", "API_PAGE_SIZE": "20"}
    printed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, deskcomm.settings as s; "
            f"print(json.dumps({{name: getattr(s, name) for name in {KNOB_DICTS!r}}}))",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(printed) == {
        "API": {"PAGE_SIZE": 20},
        # The LGPD dead-letter hook and the per-consumer attempts are always there.
        "EVENTBUS": {
            "MAX_ATTEMPTS": 3,
            "DEAD_LETTER_HOOKS": ["lgpd.alerts.dead_letter_hook"],
            "CONSUMER_MAX_ATTEMPTS": {"order-post-worker": 5, "lgpd-redact-worker": 3},
        },
        "WEBHOOKS": {"ALLOW_HTTP": True},
        "LGPD": {},
    }


def _databases(env: dict[str, str]) -> dict[str, dict[str, object]]:
    import json
    import os
    import subprocess
    import sys

    names = ("DATABASE_URL", "DATABASE_WORKER_URL", "DATABASE_WEB_URL", "DATABASE_ROLE")
    base = {name: value for name, value in os.environ.items() if name not in names}
    printed = subprocess.run(
        [sys.executable, "-c", "import json, deskcomm.settings as s; print(json.dumps("
         "{a: {k: c.get(k) for k in ('USER', 'HOST', 'OPTIONS')} for a, c in s.DATABASES.items()}"
         "))"],
        cwd=REPO, env={**base, **env}, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return dict(json.loads(printed))


def test_each_process_connects_as_its_role_and_a_web_one_has_the_platform_aliases() -> None:
    """core.db_roles: DATABASE_URL the owner's, DATABASE_WORKER_URL the platform processes',
    DATABASE_WEB_URL the web's, which also gets `platform` (and `platform_replica` beside a
    replica) as the worker role, with the bypass at startup."""
    urls = {
        "DATABASE_URL": "postgres://owner@db:5432/deskcomm",
        "DATABASE_WORKER_URL": "postgres://worker:w@db:5432/deskcomm",
        "DATABASE_WEB_URL": "postgres://web:x@db:5432/deskcomm",
        "DATABASE_REPLICA_URL": "postgres://web:x@standby:5432/deskcomm",
    }
    web = _databases({**urls, "DATABASE_ROLE": "web"})
    assert {alias: config["USER"] for alias, config in web.items()} == {
        "default": "web",
        "platform": "worker",
        "replica": "web",
        "platform_replica": "worker",
    }
    assert web["platform_replica"]["HOST"] == "standby"
    for alias in ("platform", "platform_replica"):
        assert "-c app.rls_bypass=on" in str(web[alias]["OPTIONS"]), alias
    assert "app.rls_bypass" not in str(web["default"]["OPTIONS"])
    worker = _databases({**urls, "DATABASE_ROLE": "worker"})
    assert {alias: config["USER"] for alias, config in worker.items()} == {
        "default": "worker",
        "replica": "web",  # the standby's URL names its own role (docs/configuration.md)
    }
    assert _databases({**urls, "DATABASE_ROLE": "owner"})["default"]["USER"] == "owner"
    # A single DATABASE_URL: every process is the owner, and no platform alias is needed.
    single = _databases({"DATABASE_URL": urls["DATABASE_URL"], "DATABASE_ROLE": "web"})
    assert {alias: config["USER"] for alias, config in single.items()} == {"default": "owner"}


def test_database_sslmode_reaches_every_connection_and_a_urls_own_wins() -> None:
    """Seed 001: DATABASE_SSLMODE for a remote server, on every alias (libpq's sslmode)."""
    urls = {
        "DATABASE_URL": "postgres://owner@db:5432/deskcomm",
        "DATABASE_WORKER_URL": "postgres://worker:w@db:5432/deskcomm?sslmode=verify-full",
        "DATABASE_WEB_URL": "postgres://web:x@db:5432/deskcomm",
        "DATABASE_REPLICA_URL": "postgres://web:x@standby:5432/deskcomm",
        "DATABASE_ROLE": "web",
    }
    web = _databases({**urls, "DATABASE_SSLMODE": "require"})
    modes = {alias: config["OPTIONS"].get("sslmode") for alias, config in web.items()}  # type: ignore[attr-defined]
    assert modes == {
        "default": "require",
        "platform": "verify-full",
        "replica": "require",
        "platform_replica": "verify-full",
    }
    unset = _databases(urls)
    assert "sslmode" not in unset["default"]["OPTIONS"]  # type: ignore[operator]


def test_cron_secret_is_an_alias_of_the_internal_cron_secret() -> None:
    import os
    import subprocess
    import sys

    def secret(**env: str) -> str:
        names = ("INTERNAL_CRON_SECRET", "CRON_SECRET")
        base = {name: value for name, value in os.environ.items() if name not in names}
        return subprocess.run(
            [sys.executable, "-c", "import deskcomm.settings as s; print(s.INTERNAL_CRON_SECRET)"],
            cwd=REPO, env={**base, **env}, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

    assert secret(CRON_SECRET="from-the-seed") == "from-the-seed"  # pragma: allowlist secret
    assert secret(CRON_SECRET="b", INTERNAL_CRON_SECRET="a") == "a"  # pragma: allowlist secret
    assert secret() == ""


def test_a_missing_env_file_is_read_quietly_and_a_present_one_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from deskcomm.settings import read_dotenv

    monkeypatch.delenv("DESKCOMM_DOTENV_PROBE", raising=False)
    with caplog.at_level(logging.DEBUG):
        read_dotenv(tmp_path / ".env")
    assert caplog.records == []  # django-environ's "... not found" line is not said
    (tmp_path / ".env").write_text("DESKCOMM_DOTENV_PROBE=read\n")
    read_dotenv(tmp_path / ".env")
    assert os.environ["DESKCOMM_DOTENV_PROBE"] == "read"
    monkeypatch.delenv("DESKCOMM_DOTENV_PROBE")
