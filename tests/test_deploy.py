"""The compose files and the Dockerfile: every service runs a command that exists here.

There is no Docker engine on the test machine: this checks the files' structure and commands;
`docker build` itself is documented in docs/deployment.md.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import get_commands

REPO = Path(__file__).resolve().parent.parent
COMPOSE_FILES = ["docker-compose.yml", "docker-compose.prod.yml"]
APP_SERVICES = {"migrate", "web", "worker", "webhooks", "jobs", "scheduler"}
# Commands of the jobs app (issue 6, another branch): on its merge, drop them from this set.
# Longest shutdown grace of a process (gunicorn's GUNICORN_GRACEFUL_TIMEOUT default).
LONGEST_PROCESS_GRACE_SECONDS = 30


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / name).read_text())
    return data


def seconds(duration: str) -> int:
    match = re.fullmatch(r"(\d+)(s|m)", duration)
    assert match, duration
    return int(match[1]) * (60 if match[2] == "m" else 1)


def command_exists(argv: list[str]) -> bool:
    """`python manage.py X`, `python -m module` and `gunicorn module` must name real code."""
    if argv[:2] == ["python", "manage.py"]:
        return argv[2] in get_commands()
    if argv[:2] == ["python", "-m"]:
        return importlib.util.find_spec(argv[2]) is not None
    if argv[0] == "gunicorn":
        return (REPO / "gunicorn.conf.py").is_file() and importlib.util.find_spec(
            argv[1]
        ) is not None
    return False


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_every_service_command_exists(name: str) -> None:
    services = load(name)["services"]
    assert {"postgres", "redis", *APP_SERVICES} <= set(services)
    for service in APP_SERVICES:
        config = services[service]
        assert command_exists(config["command"]), (service, config["command"])
        if service != "migrate":
            probe = config["healthcheck"]["test"]
            assert probe[0] == "CMD" and command_exists(probe[1:]), (service, probe)


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_services_restart_stop_gracefully_and_wait_for_migrations(name: str) -> None:
    services = load(name)["services"]
    assert services["db-roles"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    roles_done = {"db-roles": {"condition": "service_completed_successfully"}}
    assert services["migrate"]["depends_on"] == roles_done
    assert services["migrate"]["restart"] == services["db-roles"]["restart"] == "no"
    for service in APP_SERVICES - {"migrate"}:
        config = services[service]
        assert config["restart"] in {"always", "unless-stopped"}
        assert seconds(config["stop_grace_period"]) > LONGEST_PROCESS_GRACE_SECONDS
        assert config["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    for service in ("postgres", "redis"):
        assert "healthcheck" in services[service]


def test_production_compose_pulls_images_and_reads_env() -> None:
    for service in APP_SERVICES:
        config = load("docker-compose.prod.yml")["services"][service]
        assert "build" not in config and config["image"].startswith("${DESKCOMM_IMAGE")
        assert config["env_file"] == ".env"


def test_the_web_service_uses_multiprocess_metrics() -> None:
    for name in COMPOSE_FILES:
        web = load(name)["services"]["web"]
        assert web["environment"]["PROMETHEUS_MULTIPROC_DIR"]


def test_dockerfile_is_multi_stage_non_root_without_build_tools() -> None:
    text = (REPO / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)[1:]
    assert len(stages) == 2
    build, final = stages
    assert "build-essential" in build and "build-essential" not in final
    assert re.search(r"^USER deskcomm$", final, flags=re.MULTILINE)
    assert "COPY --from=build /opt/venv /opt/venv" in final


def role_of(url: str) -> str:
    match = re.fullmatch(r"postgres://([^:@]+):[^@]+@postgres:5432/deskcomm", url)
    assert match, url
    return match[1]


@pytest.mark.parametrize("name", COMPOSE_FILES)
def test_each_service_connects_as_its_own_database_role(name: str) -> None:
    """migrate as the owner, web as the web role (and the worker role for its platform work),
    every other process as the worker role; no service holds a URL it does not use."""
    services = load(name)["services"]

    def urls(service: str) -> dict[str, str]:
        env = services[service]["environment"]
        return {key: role_of(value) for key, value in env.items() if key.startswith("DATABASE_")}

    owner = services["db-roles"]["environment"]["DESKCOMM_OWNER_ROLE"]
    assert urls("migrate")["DATABASE_URL"] == owner
    assert urls("web") == {
        "DATABASE_WEB_URL": "deskcomm_web",
        "DATABASE_WORKER_URL": "deskcomm_worker",
    }
    for service in APP_SERVICES - {"migrate", "web"}:
        assert urls(service) == {"DATABASE_WORKER_URL": "deskcomm_worker"}, service
    roles = services["db-roles"]
    assert roles["environment"]["DESKCOMM_WORKER_ROLE"] == "deskcomm_worker"
    assert roles["environment"]["DESKCOMM_WEB_ROLE"] == "deskcomm_web"
    assert roles["environment"]["PGUSER"] == services["postgres"]["environment"]["POSTGRES_USER"]
    source, target, _ = roles["volumes"][0].split(":")
    assert (REPO / source).resolve() == REPO / "deploy" / "postgres" / "roles.sql"
    assert roles["command"][-1] == target
    # Each role's password is the same variable where it is set and where it is used.
    secret = re.compile(r"\$\{(\w+)")
    worker_url = services["worker"]["environment"]["DATABASE_WORKER_URL"]
    web_url = services["web"]["environment"]["DATABASE_WEB_URL"]
    assert secret.findall(worker_url) == secret.findall(
        roles["environment"]["DESKCOMM_WORKER_PASSWORD"]
    )
    assert secret.findall(web_url) == secret.findall(roles["environment"]["DESKCOMM_WEB_PASSWORD"])


def test_the_roles_script_makes_the_roles_on_a_fresh_server_and_again_on_an_old_one() -> None:
    """deploy/postgres/roles.sql on a private cluster whose superuser is the owner (as the
    postgres image's POSTGRES_USER is), twice: the roles, their memberships and passwords."""
    import shutil
    import subprocess
    import tempfile

    import psycopg

    from tests.support.streaming import HOST, Server, Tools, free_ports

    tools = Tools.find()
    root = Path(tempfile.mkdtemp(prefix="deskcomm-roles-"))
    tools.give(root)
    server = Server(tools, root / "data", free_ports(1)[0])
    tools.run("initdb", "-D", str(server.data), "--auth=trust", "--username=deskcomm")
    server.start()
    try:
        url = f"host={HOST} port={server.port} user=deskcomm"
        with psycopg.connect(f"{url} dbname=postgres", autocommit=True) as db:
            db.execute("CREATE DATABASE deskcomm")
        env = {
            "PGHOST": HOST,
            "PGPORT": str(server.port),
            "PGUSER": "deskcomm",
            "PGDATABASE": "deskcomm",
            "DESKCOMM_WORKER_ROLE": "deskcomm_worker",
            "DESKCOMM_WORKER_PASSWORD": "worker-secret",  # pragma: allowlist secret
            "DESKCOMM_WEB_ROLE": "deskcomm_web",
            "DESKCOMM_WEB_PASSWORD": "web-secret",  # pragma: allowlist secret
        }
        script = str(REPO / "deploy" / "postgres" / "roles.sql")
        psql = [str(tools.bin_dir / "psql"), "-X", "-q", "-f", script]
        for _ in range(2):  # a new volume, then every later start
            done = subprocess.run(psql, env=env, capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
        with psycopg.connect(f"{url} dbname=deskcomm", autocommit=True) as db:
            rows = db.execute(
                "SELECT rolname, rolcanlogin, rolsuper, rolbypassrls, rolcreatedb,"
                " rolpassword IS NOT NULL,"
                " pg_has_role(rolname, 'deskcomm_platform', 'MEMBER'),"
                " pg_has_role(rolname, 'deskcomm_app', 'USAGE')"
                " FROM pg_authid WHERE rolname LIKE 'deskcomm%' ORDER BY 1"
            ).fetchall()
            assert rows == [
                ("deskcomm", True, True, True, True, False, True, True),  # a superuser
                ("deskcomm_app", False, False, False, False, False, False, True),
                ("deskcomm_platform", False, False, False, False, False, True, False),
                ("deskcomm_web", True, False, False, False, True, False, True),
                ("deskcomm_worker", True, False, False, True, True, True, True),
            ]
            for database in ("deskcomm", "template1"):
                with psycopg.connect(f"{url} dbname={database}") as each:
                    granted = each.execute(
                        "SELECT has_table_privilege('public', 'pg_stat_activity', 'SELECT'),"
                        " has_table_privilege('deskcomm_platform', 'pg_stat_activity', 'SELECT')"
                    ).fetchone()
                    assert granted == (False, True), database
        for role, allowed in (("deskcomm_worker", True), ("deskcomm_web", False)):
            with psycopg.connect(
                f"{url[: url.index(' user=')]} user={role} dbname=deskcomm"
            ) as as_role:
                try:
                    as_role.execute("SELECT count(*) FROM pg_stat_activity").fetchone()
                    assert allowed, role
                except psycopg.errors.InsufficientPrivilege:
                    assert not allowed, role
        # An owner that is not the superuser running the script is made a platform member.
        with psycopg.connect(f"{url} dbname=deskcomm", autocommit=True) as db:
            db.execute("CREATE ROLE shop_owner LOGIN")
        owned = {**env, "DESKCOMM_OWNER_ROLE": "shop_owner"}
        done = subprocess.run(psql, env=owned, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        with psycopg.connect(f"{url} dbname=deskcomm") as db:
            member = "SELECT pg_has_role('shop_owner', 'deskcomm_platform', 'MEMBER')"
            assert db.execute(member).fetchone() == (True,)
        # A compose install's owner (DESKCOMM_OWNER_PASSWORD set): its own login role, made
        # when missing, never a superuser, the database's owner; run twice as on every start.
        compose_owner = {
            **env,
            "DESKCOMM_OWNER_ROLE": "app_owner",
            "DESKCOMM_OWNER_PASSWORD": "owner-secret",  # pragma: allowlist secret
        }
        for _ in range(2):
            done = subprocess.run(
                psql, env=compose_owner, capture_output=True, text=True, check=False
            )
            assert done.returncode == 0, done.stderr
        with psycopg.connect(f"{url} dbname=deskcomm") as db:
            owner_row = db.execute(
                "SELECT rolcanlogin, rolsuper, rolbypassrls, rolpassword IS NOT NULL,"
                " pg_has_role(rolname, 'deskcomm_platform', 'MEMBER'),"
                " (SELECT pg_get_userbyid(datdba) FROM pg_database"
                "   WHERE datname = current_database())"
                " FROM pg_authid WHERE rolname = 'app_owner'"
            ).fetchone()
            assert owner_row == (True, False, False, True, True, "app_owner")
        missing = {**env, "DESKCOMM_WEB_PASSWORD": ""}
        refused = subprocess.run(psql, env=missing, capture_output=True, text=True, check=False)
        assert refused.returncode != 0 and "DESKCOMM_WEB_PASSWORD" in refused.stderr
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
