"""The production deployment as files (issue 42): both compose files, the Dockerfile and
`.env.example`, read with real parsers (PyYAML; django-environ's own .env reader, the one the
settings use), so a regression in the install is a red test. No Docker engine runs here: what
was verified how is in docs/deployment.md.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import environ
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILES = ["docker-compose.yml", "docker-compose.prod.yml"]
APP_SERVICES = {"migrate", "web", "worker", "webhooks", "jobs", "scheduler"}
DATA = PurePosixPath("/data")
# Every file root the product writes to (core.checks.file_roots names them).
FILE_ROOTS = {
    "MEDIA_ROOT",
    "BACKUP_ROOT",
    "ARCHIVE_ROOT",
    "LGPD_EXPORT_ROOT",
    "READ_ONLY_BUFFER_ROOT",
}


def compose(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / name).read_text())
    return data


def parse_env(path: Path) -> dict[str, str]:
    """A .env file as the settings read it (django-environ's parser), into a dict."""

    class Parsed(environ.Env):
        ENVIRON: dict[str, str] = {}

    Parsed.read_env(str(path), overwrite=True)
    return dict(Parsed.ENVIRON)


def env_example() -> dict[str, str]:
    return parse_env(REPO / ".env.example")


def dockerfile_env() -> dict[str, str]:
    """The final stage's ENV (`ENV A=1 \\ B=2` form)."""
    final = re.split(r"^FROM ", (REPO / "Dockerfile").read_text(), flags=re.MULTILINE)[-1]
    values: dict[str, str] = {}
    for block in re.findall(r"^ENV ((?:.*\\\n)*.*)$", final, flags=re.MULTILINE):
        for pair in block.replace("\\\n", " ").split():
            key, _, value = pair.partition("=")
            values[key] = value
    return values


def under_data(value: str) -> bool:
    path = PurePosixPath(value)
    return path.is_absolute() and DATA in path.parents


def volume_mounts(config: dict[str, Any]) -> dict[str, str]:
    """target -> source of a service's volumes (short syntax)."""
    mounts = {}
    for volume in config.get("volumes", []):
        source, target, *_ = volume.split(":")
        mounts[target] = source
    return mounts


# --- Item 1: every file root under the one data volume ------------------------------------------


def test_the_file_roots_this_test_knows_are_all_the_product_has() -> None:
    from core.checks import file_roots

    assert set(file_roots()) == FILE_ROOTS


def test_the_image_puts_every_file_root_under_its_data_volume() -> None:
    env = dockerfile_env()
    text = (REPO / "Dockerfile").read_text()
    for name in FILE_ROOTS:
        assert under_data(env[name]), (name, env[name])
        assert env[name] in text.split("mkdir -p", 1)[1].split("\n", 1)[0], name
    assert re.search(r"^VOLUME /data$", text, flags=re.MULTILINE)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_process_shares_one_data_volume_holding_every_file_root(name: str) -> None:
    """An LGPD export written by the worker is served by the web: the same named volume at
    /data in every app container, and each root set there (it wins over .env's)."""
    data = compose(name)
    sources = set()
    for service in APP_SERVICES:
        config = data["services"][service]
        mounts = volume_mounts(config)
        assert str(DATA) in mounts, service
        sources.add(mounts[str(DATA)])
        for root in FILE_ROOTS:
            assert under_data(config["environment"][root]), (service, root)
    (volume,) = sources
    assert volume in data["volumes"]


def test_env_example_keeps_every_file_root_on_the_data_volume() -> None:
    env = env_example()
    for name in FILE_ROOTS:
        assert under_data(env[name]), (name, env[name])


# --- Item 2: the database roles; no process connects as a superuser --------------------------


def user_of(url: str) -> str:
    match = re.fullmatch(r"postgres://([^:@]+):\$\{(\w+)[^}]*\}@postgres:5432/deskcomm", url)
    assert match, url
    return match[1]


def password_variable(value: str) -> str:
    match = re.search(r"\$\{(\w+)", value)
    assert match, value
    return match[1]


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_no_deskcomm_process_connects_as_the_superuser(name: str) -> None:
    services = compose(name)["services"]
    superuser = services["postgres"]["environment"]["POSTGRES_USER"]
    roles = services["db-roles"]["environment"]
    assert roles["PGUSER"] == superuser  # only the one-shot init step
    owner = roles["DESKCOMM_OWNER_ROLE"]
    assert owner != superuser
    assert password_variable(roles["DESKCOMM_OWNER_PASSWORD"]) != password_variable(
        roles["PGPASSWORD"]
    )
    for service in APP_SERVICES:
        env = services[service]["environment"]
        users = {user_of(v) for k, v in env.items() if k.startswith("DATABASE_") and "URL" in k}
        assert users and superuser not in users, service
    migrate = services["migrate"]["environment"]["DATABASE_URL"]
    assert user_of(migrate) == owner
    assert password_variable(migrate) == password_variable(roles["DESKCOMM_OWNER_PASSWORD"])


def test_the_production_compose_requires_every_role_password() -> None:
    """`${VAR:?...}`: compose refuses to start with a password unset (no default password)."""
    text = (REPO / "docker-compose.prod.yml").read_text()
    for variable in (
        "POSTGRES_PASSWORD",
        "DESKCOMM_OWNER_PASSWORD",
        "DESKCOMM_WORKER_PASSWORD",
        "DESKCOMM_WEB_PASSWORD",
    ):
        uses = re.findall(rf"\$\{{{variable}(:[?-])", text)
        assert uses and set(uses) == {":?"}, variable
        assert variable in env_example(), variable


# --- Item 6: seed 001's WAHA items ---------------------------------------------------------------


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_waha_has_a_healthcheck_limits_and_its_sessions_in_the_backups(name: str) -> None:
    services = compose(name)["services"]
    waha = services["waha"]
    probe = waha["healthcheck"]["test"]
    assert probe[0] == "CMD" and "http://127.0.0.1:3000/ping" in " ".join(probe)
    limits = waha["deploy"]["resources"]["limits"]
    assert limits["cpus"] and limits["memory"]
    sessions = volume_mounts(waha)["/app/.sessions"]
    # The backup job (jobs process) reads the same volume where WAHA_SESSIONS_ROOT says.
    jobs = services["jobs"]
    root = jobs["environment"]["WAHA_SESSIONS_ROOT"]
    assert volume_mounts(jobs)[root] == sessions
    assert any(v.endswith(f"{root}:ro") for v in jobs["volumes"])  # never written by Deskcomm


def test_no_app_container_carries_the_superusers_or_the_owners_password() -> None:
    """The production services read .env whole (env_file): the compose-only secrets are blanked
    in their environment, which wins over env_file."""
    services = compose("docker-compose.prod.yml")["services"]
    for service in APP_SERVICES:
        env = services[service]["environment"]
        for secret in ("POSTGRES_PASSWORD", "DESKCOMM_OWNER_PASSWORD", "GRAFANA_ADMIN_PASSWORD"):
            assert env[secret] == "", (service, secret)
