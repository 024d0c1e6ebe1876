"""The `monitoring` compose profile (issue 42, item 3): Prometheus loads the shipped rules and
scrapes every process with the metrics token, Alertmanager routes to e-mail and a
Slack-compatible webhook from the environment (checked with amtool, as the rules are with
promtool), Grafana has the dashboard provisioned."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_deployment import REPO, compose, volume_mounts

PROMETHEUS_CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
ALERTMANAGER = REPO / "deploy" / "alertmanager"
MONITORING = ("prometheus", "alertmanager", "grafana")
MAIL_ONLY = {
    "ALERT_EMAIL_TO": "ops@example.com",
    "ALERT_EMAIL_FROM": "alertmanager@example.com",
    "ALERT_SMTP_SMARTHOST": "smtp.example.com:587",
}


def tool(name: str, package: str) -> str:
    """A Debian tool (.ci/run installs it); under CI=true a missing one is a failure."""
    found = shutil.which(name)
    if found:
        return found
    reason = f"{name} not found (apt-get install {package})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose("docker-compose.prod.yml")["services"]
    return found


def render(tmp_path: Path, **env: str) -> Path:
    """deploy/alertmanager/render.sh, as the container runs it (POSIX sh + awk)."""
    tmp_path.mkdir(exist_ok=True)
    output = tmp_path / "alertmanager.yml"
    done = subprocess.run(
        ["sh", str(ALERTMANAGER / "render.sh"), str(ALERTMANAGER / "alertmanager.yml"),
         str(output)],
        env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return output


def test_the_monitoring_services_are_an_opt_in_profile() -> None:
    found = services()
    for name in MONITORING:
        assert found[name]["profiles"] == ["monitoring"], name
    for name in ("web", "worker", "postgres"):
        assert "profiles" not in found[name], name


def test_prometheus_loads_the_rules_and_scrapes_every_process_with_the_token(
    tmp_path: Path,
) -> None:
    prometheus = services()["prometheus"]
    mounts = volume_mounts(prometheus)
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    (rules,) = config["rule_files"]
    assert (REPO / mounts[rules]).resolve() == REPO / "deploy" / "prometheus" / "deskcomm-rules.yml"
    assert (REPO / mounts["/etc/prometheus/prometheus.yml"]).resolve() == PROMETHEUS_CONFIG
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    web = jobs["deskcomm-web"]
    token_file = web["authorization"]["credentials_file"]
    # The entrypoint writes METRICS_TOKEN (from .env, required) to that file, then starts.
    command = " ".join(prometheus["command"])
    assert f'"$$METRICS_TOKEN" > {token_file}' in command and "exec /bin/prometheus" in command
    assert prometheus["environment"]["METRICS_TOKEN"].startswith("${METRICS_TOKEN:?")
    targets = [t for job in jobs.values() for c in job["static_configs"] for t in c["targets"]]
    app = services()
    for target in targets:
        host, port = target.split(":")
        env = app[host]["environment"]
        assert port == ("8000" if host == "web" else env["METRICS_PORT"]), target
    assert {t.split(":")[0] for t in targets} == {"web", "worker", "webhooks"}
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == [
        "alertmanager:9093"
    ]
    # promtool on the same file, the container paths pointed at the repository's files.
    promtool = tool("promtool", "prometheus")
    (tmp_path / "token").write_text("t")
    text = PROMETHEUS_CONFIG.read_text().replace(rules, mounts[rules].replace("./", f"{REPO}/"))
    checked = tmp_path / "prometheus.yml"
    checked.write_text(text.replace(token_file, str(tmp_path / "token")))
    done = subprocess.run([promtool, "check", "config", str(checked)], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_alertmanager_mails_the_operators_and_posts_to_the_webhook_when_set(
    tmp_path: Path,
) -> None:
    amtool = tool("amtool", "prometheus-alertmanager")
    mail_only_file = render(tmp_path / "mail", **MAIL_ONLY)
    mail_only = yaml.safe_load(mail_only_file.read_text())
    (receiver,) = mail_only["receivers"]
    assert receiver["email_configs"][0]["to"] == "ops@example.com"
    assert "slack_configs" not in receiver  # no webhook URL: mail only
    assert mail_only["global"]["smtp_smarthost"] == "smtp.example.com:587"
    hook = "https://hooks.slack.com/services/T0/B0/secret"  # pragma: allowlist secret
    both = render(tmp_path / "both", **MAIL_ONLY, ALERT_SLACK_WEBHOOK_URL=hook)
    (receiver,) = yaml.safe_load(both.read_text())["receivers"]
    assert receiver["slack_configs"][0]["api_url"] == hook
    for config in (mail_only_file, both):
        done = subprocess.run([amtool, "check-config", str(config)], capture_output=True,
                              text=True, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    # The service renders the mounted template with the environment from .env.
    service = services()["alertmanager"]
    mounts = volume_mounts(service)
    entry = service["entrypoint"]
    assert (REPO / mounts[entry[2]]).resolve() == ALERTMANAGER / "alertmanager.yml"
    assert (REPO / mounts[entry[1]]).resolve() == ALERTMANAGER / "render.sh"
    assert f"--config.file={entry[3]}" in entry
    for variable in (*MAIL_ONLY, "ALERT_SLACK_WEBHOOK_URL"):
        assert variable in service["environment"], variable


def test_grafana_provisions_the_prometheus_source_and_the_dashboard() -> None:
    grafana = services()["grafana"]
    mounts = volume_mounts(grafana)
    provisioning = REPO / mounts["/etc/grafana/provisioning"]
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "deskcomm.yml").read_text())[
        "providers"
    ]
    folder = provider["options"]["path"]
    dashboards = [t for t in mounts if t.startswith(folder + "/")]
    assert [Path(mounts[t]).name for t in dashboards] == ["deskcomm-dashboard.json"]
    (source,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())[
        "datasources"
    ]
    assert source["url"] == "http://prometheus:9090" and source["isDefault"]
    # The dashboard's ${DS_PROMETHEUS} resolves under provisioning too: a datasource variable.
    import json

    dashboard = json.loads((REPO / "deploy" / "grafana" / "deskcomm-dashboard.json").read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == source["type"]
    assert grafana["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith(
        "${GRAFANA_ADMIN_PASSWORD:?"
    )
