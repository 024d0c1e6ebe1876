"""Production refuses unsafe settings (at WSGI start too); `check --deploy` is clean when safe."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from django.test import Client
from django.test.utils import override_settings

from core import key_variables
from core.checks import check_production_settings
from tests.support.processes import REPO, subprocess_env

PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": secrets.token_urlsafe(64),
    "ALLOWED_HOSTS": "crm.example.com",
    "ENCRYPTION_KEYS_WEBHOOKS": Fernet.generate_key().decode(),
    "ENCRYPTION_KEYS_CPF": Fernet.generate_key().decode(),
    "ENCRYPTION_KEYS_AI_PROVIDERS": Fernet.generate_key().decode(),
    "ENCRYPTION_KEYS_OAUTH": Fernet.generate_key().decode(),
    "ENCRYPTION_KEYS_WAHA": Fernet.generate_key().decode(),
    "ENCRYPTION_KEYS_PIPELINES": Fernet.generate_key().decode(),
    "METRICS_TOKEN": "metrics-token-for-tests",
    "HTTPS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "LOG_FORMAT": "json",
    # Somewhere for alerts to go (deskcomm.E010).
    "ADMINS": "ops@example.com",
    "EMAIL_URL": "smtp+tls://alerts:pw@mail.example.com:587",  # pragma: allowlist secret
    # Where the LGPD SLA mails go (deskcomm.E011).
    "LGPD_DPO_EMAIL": "dpo@example.com",
    # The shared data volume (deskcomm.E008 refuses relative and container-local roots).
    "MEDIA_ROOT": "/data/media",
    "BACKUP_ROOT": "/data/backups",
    "ARCHIVE_ROOT": "/data/archive",
    "LGPD_EXPORT_ROOT": "/data/lgpd-exports",
    "READ_ONLY_BUFFER_ROOT": "/data/read-only-buffer",
}


def run(code_or_args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *code_or_args],
        check=False,
        cwd=REPO,
        env=subprocess_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings() -> None:
    result = run(["manage.py", "check", "--deploy", "--fail-level", "ERROR"], **PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    # Only drf-spectacular's schema warnings about the webhooks API views remain (not settings).
    reported = re.findall(r"\((\w+)\.([EW]\d+)\)", result.stdout + result.stderr)
    assert {app for app, _ in reported} <= {"drf_spectacular"}, result.stderr


def test_check_deploy_reports_the_unsafe_defaults() -> None:
    result = run(["manage.py", "check", "--deploy"], DEBUG="false", SECRET_KEY="", HTTPS="false")
    assert result.returncode != 0
    for check_id in ("deskcomm.E004", "security.W004", "security.W008"):
        assert check_id in result.stderr


@pytest.mark.parametrize(
    ("override", "check_id"),
    [
        ({"SECRET_KEY": ""}, "deskcomm.E004"),
        ({"SECRET_KEY": "short"}, "deskcomm.E004"),
        ({"ALLOWED_HOSTS": ""}, "deskcomm.E005"),
        ({"ENCRYPTION_KEYS_WEBHOOKS": ""}, "deskcomm.E002"),
        ({"ENCRYPTION_KEYS_WEBHOOKS": "", "SECRET_KEY": ""}, "deskcomm.E006"),
        ({"ENCRYPTION_KEYS_CPF": ""}, "deskcomm.E002"),
        ({"MEDIA_ROOT": "var/media"}, "deskcomm.E008"),
        ({"ADMINS": ""}, "deskcomm.E010"),
        ({"EMAIL_URL": "consolemail://"}, "deskcomm.E010"),
        ({"LGPD_DPO_EMAIL": ""}, "deskcomm.E011"),
        ({"ADMIN_OTP_REQUIRED": "false"}, "deskcomm.E012"),
        ({"LGPD_EXPORT_ROOT": str(REPO / "var" / "lgpd-exports")}, "deskcomm.E008"),
    ],
)
def test_wsgi_refuses_to_start_on_unsafe_settings(override: dict[str, str], check_id: str) -> None:
    result = run(["-c", "import deskcomm.wsgi"], **{**PRODUCTION, **override})
    assert result.returncode != 0
    assert check_id in result.stderr and "Refusing to start" in result.stderr


@pytest.mark.django_db
def test_a_worker_refuses_to_start_on_a_container_local_file_root() -> None:
    """drain_events runs the checks at start: the archive it would write under a relative root
    is lost with its container, so it exits naming the setting (the web: the WSGI test above)."""
    result = run(
        ["manage.py", "drain_events", "--once"], **{**PRODUCTION, "ARCHIVE_ROOT": "var/archive"}
    )
    assert result.returncode != 0
    # (django-environ resolves a relative path against the working directory: the code's here)
    assert "deskcomm.E008" in result.stderr and "ARCHIVE_ROOT is " in result.stderr
    assert "inside the code directory" in result.stderr


@pytest.mark.django_db
@pytest.mark.parametrize(
    "start", [["manage.py", "drain_events", "--once"], ["-c", "import deskcomm.wsgi"]]
)
def test_a_process_refuses_to_start_connected_as_a_superuser(start: list[str]) -> None:
    """deskcomm.E009 at start (a worker, the web): row-level security would not apply."""
    from urllib.parse import urlsplit

    from dev.pg_roles import PG_SUPERUSER
    from tests.support.db import database_url

    parts = urlsplit(database_url())
    superuser = parts._replace(netloc=f"{PG_SUPERUSER}@{parts.hostname}:{parts.port}").geturl()
    # Whatever role the command picks, it connects as the superuser.
    urls = dict.fromkeys(("DATABASE_URL", "DATABASE_WORKER_URL", "DATABASE_WEB_URL"), superuser)
    result = run(start, **{**PRODUCTION, **urls, "DATABASE_ROLE": ""})
    assert result.returncode != 0
    assert "deskcomm.E009" in result.stderr and "superuser" in result.stderr
    allowed = run(
        start, **{**PRODUCTION, **urls, "DATABASE_ROLE": "", "DATABASE_ALLOW_SUPERUSER": "true"}
    )
    assert "deskcomm.E009" not in allowed.stderr


def test_wsgi_starts_with_production_settings() -> None:
    result = run(["-c", "import deskcomm.wsgi; print('started')"], **PRODUCTION)
    assert result.returncode == 0, result.stderr
    assert "started" in result.stdout


def test_debug_skips_the_production_checks() -> None:
    with override_settings(DEBUG=True, ALLOWED_HOSTS=[]):
        assert check_production_settings() == []


def test_missing_metrics_token_is_a_warning() -> None:
    with override_settings(METRICS_TOKEN=""):
        ids = [m.id for m in check_production_settings()]
    assert "deskcomm.W001" in ids


@pytest.mark.django_db
def test_security_headers() -> None:
    response = Client().get("/api/ping")
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"


@pytest.mark.django_db
def test_hsts_when_tls() -> None:
    with override_settings(SECURE_HSTS_SECONDS=31536000, SECURE_SSL_REDIRECT=True):
        response = Client().get("/api/ping", secure=True)
        redirected = Client().get("/api/ping")
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    assert redirected.status_code == 301


@pytest.mark.parametrize("variable", sorted(key_variables.VARIABLES.values()))
def test_a_missing_encryption_key_is_refused_naming_its_variable(variable: str) -> None:
    result = run(["-c", "import deskcomm.wsgi"], **{**PRODUCTION, variable: ""})
    assert result.returncode != 0
    [refusal] = [line for line in result.stderr.splitlines() if "deskcomm.E002" in line]
    assert f"set {variable} " in refusal, result.stderr
    assert [v for v in key_variables.VARIABLES.values() if v in refusal] == [variable]


@pytest.mark.parametrize(("context", "former"), sorted(key_variables.FORMER_NAMES.items()))
def test_a_deprecated_key_variable_still_works_and_is_warned_about_once(
    context: str, former: str
) -> None:
    current = key_variables.VARIABLES[context]
    key = Fernet.generate_key().decode()
    result = run(
        ["-c", f"import deskcomm.wsgi, core.crypto as c; print(c.configured_keys({context!r}))"],
        **{**PRODUCTION, current: "", former: key},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == repr([key])  # read through the old name
    warning = f"{former} is deprecated: rename it to {current}"
    assert (result.stdout + result.stderr).count(warning) == 1, result.stdout  # logs: stdout


def test_a_deprecated_key_variable_beside_its_new_name_with_another_key_refuses_to_start() -> None:
    other = Fernet.generate_key().decode()
    result = run(["-c", "import deskcomm.wsgi"], **{**PRODUCTION, "CPF_ENCRYPTION_KEY": other})
    assert result.returncode != 0
    assert (
        "ENCRYPTION_KEYS_CPF and its deprecated alias CPF_ENCRYPTION_KEY are both set, to "
        "different keys" in result.stderr
    )
    same = PRODUCTION["ENCRYPTION_KEYS_CPF"]  # the same keys under both names: only the warning
    result = run(["-c", "import deskcomm.wsgi"], **{**PRODUCTION, "CPF_ENCRYPTION_KEY": same})
    assert result.returncode == 0, result.stderr
    assert "CPF_ENCRYPTION_KEY is deprecated: rename it to ENCRYPTION_KEYS_CPF" in result.stdout
