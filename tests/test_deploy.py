"""The compose files and the Dockerfile: every service runs a command that exists here.

There is no Docker engine on the test machine: this checks the files' structure and commands;
`docker build` itself is documented in README.md (Deploy with Docker).
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
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["migrate"]["restart"] == "no"
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
