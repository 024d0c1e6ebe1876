"""The `monitoring` compose profile (issue 42, item 3): Prometheus loads the shipped rules and
scrapes every process with the metrics token, Alertmanager routes to e-mail and a
Slack-compatible webhook from the environment (checked with amtool, as the rules are with
promtool), Grafana has the dashboard provisioned; the blackbox exporter and node_exporter feed
the rules that read them (issue 46: A13, A18, the health SLO)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_deployment import REPO, compose, volume_mounts

PROMETHEUS = REPO / "deploy" / "prometheus"
PROMETHEUS_CONFIG = PROMETHEUS / "prometheus.yml"
ALERTMANAGER = REPO / "deploy" / "alertmanager"
MONITORING = ("prometheus", "alertmanager", "grafana", "blackbox", "node-exporter")
DESKCOMM_JOBS = ("deskcomm-web", "deskcomm-workers")
MAIL_ONLY = {
    "ALERT_EMAIL_TO": "ops@example.com",
    "ALERT_EMAIL_FROM": "alertmanager@example.com",
    "ALERT_SMTP_SMARTHOST": "smtp.example.com:587",
}


def tool(name: str, package: str, *aliases: str) -> str:
    """A Debian tool (.ci/run installs it); under CI=true a missing one is a failure."""
    for candidate in (name, *aliases):
        found = shutil.which(candidate)
        if found:
            return found
    reason = f"{name} not found (apt-get install {package})"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


def services() -> dict[str, Any]:
    found: dict[str, Any] = compose("docker-compose.prod.yml")["services"]
    return found


def scrape_jobs() -> dict[str, dict[str, Any]]:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    return {job["job_name"]: job for job in config["scrape_configs"]}


def scraped_address(job: dict[str, Any]) -> set[str]:
    """host:port Prometheus connects to: the targets, or a relabelled __address__ (blackbox)."""
    for rule in job.get("relabel_configs", []):
        if rule.get("target_label") == "__address__":
            return {rule["replacement"]}
    return {t for config in job["static_configs"] for t in config["targets"]}


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
    jobs = scrape_jobs()
    web = jobs["deskcomm-web"]
    token_file = web["authorization"]["credentials_file"]
    # The entrypoint writes METRICS_TOKEN (from .env, required) to that file, then starts.
    command = " ".join(prometheus["command"])
    assert f'"$$METRICS_TOKEN" > {token_file}' in command and "exec /bin/prometheus" in command
    assert prometheus["environment"]["METRICS_TOKEN"].startswith("${METRICS_TOKEN:?")
    targets = [t for name in DESKCOMM_JOBS for t in scraped_address(jobs[name])]
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


# --- The exporters the rules read (issue 46: A13 HealthCheckFailing, A18 DiskAlmostFull) ----------

# Metric name prefix -> the compose service exporting it (deskcomm_*: the app's own processes).
EXPORTERS = {"probe_": "blackbox", "node_": "node-exporter"}
SELECTOR = re.compile(r"\b([a-z_]+)\{([^}]*)\}")
JOB_MATCHER = re.compile(r'\bjob\s*=~?\s*"([^"]*)"')


def rule_selectors() -> list[tuple[str, str | None]]:
    """(metric, the `job` it selects or None) for every selector of every alert/recording rule."""
    groups = yaml.safe_load((PROMETHEUS / "deskcomm-rules.yml").read_text())["groups"]
    found = []
    for expr in (rule["expr"] for group in groups for rule in group["rules"]):
        for metric, matchers in SELECTOR.findall(expr):
            job = JOB_MATCHER.search(matchers)
            found.append((metric, job[1] if job else None))
        for metric in re.findall(r"\b(?:probe|node)_[a-z_]+\b(?!\{)", expr):
            found.append((metric, None))
    return found


def test_the_exporters_are_in_the_profile_with_their_config() -> None:
    found = services()
    blackbox = found["blackbox"]
    mounts = volume_mounts(blackbox)
    (flag,) = [a for a in blackbox["command"] if a.startswith("--config.file=")]
    assert (REPO / mounts[flag.split("=", 1)[1]]).resolve() == PROMETHEUS / "blackbox.yml"
    node = found["node-exporter"]
    mounts = volume_mounts(node)
    (rootfs,) = [a.split("=", 1)[1] for a in node["command"] if a.startswith("--path.rootfs=")]
    assert mounts[rootfs] == "/"
    # The data volume every app process writes, read-only, so its filesystem is reported.
    data = volume_mounts(found["web"])["/data"]
    assert mounts["/data"] == data
    for volume in node["volumes"]:
        assert volume.split(":")[2].split(",")[0] == "ro", volume  # never written
    for name in ("blackbox", "node-exporter"):
        assert "ports" not in found[name], name  # internal network only


def test_every_metric_the_rules_read_from_an_exporter_has_a_scrape_job_providing_it() -> None:
    jobs = scrape_jobs()
    compose_services = services()
    selectors = rule_selectors()
    used = {metric for metric, _ in selectors}
    assert {"probe_success", "node_filesystem_avail_bytes", "node_filesystem_size_bytes"} <= used
    for metric, job in selectors:
        prefix = next((p for p in EXPORTERS if metric.startswith(p)), None)
        if prefix is None:
            assert metric.startswith("deskcomm_"), metric  # nothing else is scraped
            # The jobs' gauges carry job="backup"...: kept only with honor_labels.
            if job is not None:
                assert jobs["deskcomm-web"].get("honor_labels") is True, (metric, job)
            continue
        service = EXPORTERS[prefix]
        assert compose_services[service]["profiles"] == ["monitoring"], service
        providers = {
            name for name, config in jobs.items()
            if {a.split(":")[0] for a in scraped_address(config)} == {service}
        }  # fmt: skip
        assert providers, (metric, service)
        if job is not None:
            assert job in providers, (metric, job, providers)


def test_the_health_probe_reaches_web_on_the_internal_network() -> None:
    health = scrape_jobs()["deskcomm-health"]
    assert health["metrics_path"] == "/probe"
    (module,) = health["params"]["module"]
    modules = yaml.safe_load((PROMETHEUS / "blackbox.yml").read_text())["modules"]
    assert modules[module]["prober"] == "http"
    assert modules[module]["http"]["valid_status_codes"] == [200]
    targets = [t for config in health["static_configs"] for t in config["targets"]]
    assert targets == ["http://web:8000/api/v1/health"]
    # Django refuses an unknown Host: web's ALLOWED_HOSTS adds the service name to .env's.
    allowed = services()["web"]["environment"]["ALLOWED_HOSTS"]
    assert allowed.startswith("${ALLOWED_HOSTS:?") and allowed.split("},", 1)[1] == "web"


def test_the_blackbox_config_passes_the_exporters_own_check() -> None:
    binary = tool("blackbox_exporter", "prometheus-blackbox-exporter",
                  "prometheus-blackbox-exporter")  # fmt: skip
    config = PROMETHEUS / "blackbox.yml"
    done = subprocess.run([binary, "--config.check", f"--config.file={config}"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
