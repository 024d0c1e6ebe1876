"""The shipped alert rules and dashboard (deploy/prometheus, deploy/grafana): promtool checks
and unit tests on synthetic series, valid PromQL in every panel, and only metrics we export."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import webhooks.metrics  # noqa: F401  (the sender's counters, served on its METRICS_PORT)
from core.metrics import exposition

REPO = Path(__file__).resolve().parent.parent
RULES = REPO / "deploy" / "prometheus" / "deskcomm-rules.yml"
RULE_TESTS = REPO / "deploy" / "prometheus" / "deskcomm-rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "deskcomm-dashboard.json"
METRIC = re.compile(r"\bdeskcomm_[a-z_]+")
SUFFIXES = ("_bucket", "_count", "_sum")
SEED_ALERTS = {  # seed 000 §10.1 and seed 001 §10 (docs/operations.md: which and why not)
    "EventBusLagHigh", "EventBusLagCritical", "EventBusFailRateHigh", "DeadLetterQueueLarge",
    "HandlerSlow", "JobQueueLarge", "CronJobFailed", "BackupFailed", "BackupMissing",
    "LgpdSlaWarning", "LgpdSlaEscalation", "LgpdSlaBreached",
    # seed 001 A9, A10 (API latency); the AI gateway's errors and latency; A17 (budget cut).
    "ApiLatencyP95High", "ApiLatencyP99Critical", "AiCallErrorsHigh", "AiCallsSlow",
    "AiBudgetThrottled",
    # seed 001 A2, A13, A18, A11; A3 (and A19), A4, A15, A7; A16, A17 (AI spend a month).
    "ErrorSpike", "HealthCheckFailing", "DiskAlmostFull", "DbQueryP95High",
    "WahaSessionFailed", "WahaSessionStartingStuck", "StuckMessagesRecovered",
    "NuvemshopRateLimited", "AiCostMonthHigh", "AiCostMonthCritical",
    # issue 41: the model provider's health pings (health-check-integrations).
    "AiProviderDown",
    # seed 001 §12's objectives: error-budget burn (multiwindow, multi-burn-rate).
    "SloErrorBudgetBurnFast", "SloErrorBudgetBurnSlow",
}  # fmt: skip
SLOS = {"api-latency", "db-latency", "waha-send-latency", "health-availability"}
BURN_WINDOWS = {"5m", "30m", "1h", "2h", "6h", "1d", "3d"}


@pytest.fixture(scope="module")
def promtool() -> str:
    """promtool from Debian's prometheus package (.ci/run installs it); CI=true requires it."""
    found = shutil.which("promtool")
    if found:
        return found
    reason = "promtool not found (apt-get install prometheus)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


def run(*command: str, cwd: Path = RULES.parent) -> str:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def rules() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def metric_names(expressions: list[str]) -> set[str]:
    names = {name for expr in expressions for name in METRIC.findall(expr)}
    return {next((n[: -len(s)] for s in SUFFIXES if n.endswith(s)), n) for n in names}


def test_the_rules_pass_promtool_check(promtool: str) -> None:
    assert f"SUCCESS: {len(rules())} rules found" in run(promtool, "check", "rules", RULES.name)


@pytest.mark.slow
def test_every_alert_fires_past_its_threshold_on_synthetic_series(promtool: str) -> None:
    assert "SUCCESS" in run(promtool, "test", "rules", RULE_TESTS.name)
    tested = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
              for t in case["alert_rule_test"]}  # fmt: skip
    assert tested == {rule["alert"] for rule in rules() if "alert" in rule} == SEED_ALERTS


def test_every_objective_has_a_burn_rate_per_window_and_a_dashboard_row() -> None:
    recorded = {(rule["record"], rule["labels"]["slo"]) for rule in rules() if "record" in rule}
    assert recorded == {(f"slo:burn_rate:{w}", slo) for w in BURN_WINDOWS for slo in SLOS}
    dashboard = json.loads(DASHBOARD.read_text())
    rows = [panel["title"] for panel in dashboard["panels"] if panel["type"] == "row"]
    assert {slo for slo in SLOS for title in rows if title.startswith(f"SLO {slo}:")} == SLOS


def test_the_operations_guide_gives_every_alert_a_meaning_and_a_first_response() -> None:
    guide = (REPO / "docs" / "operations.md").read_text()
    section = guide.split("### Alerts: meaning and first response", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \((warning|critical)\) \|([^|]*\|){3}$", section, re.M)
    listed = {name: severity for name, severity, _ in rows}
    alerts = [rule for rule in rules() if "alert" in rule]
    assert listed == {rule["alert"]: rule["labels"]["severity"] for rule in alerts}


def test_every_dashboard_query_is_valid_promql(promtool: str, tmp_path: Path) -> None:
    recorded = [
        {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(dashboard_exprs())
    ]
    (tmp_path / "dashboard.yml").write_text(
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]})
    )
    assert "SUCCESS" in run(promtool, "check", "rules", "dashboard.yml", cwd=tmp_path)


def test_the_dashboard_shows_every_alerted_metric_from_one_datasource() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    alerted = metric_names([rule["expr"] for rule in rules()])
    assert alerted <= metric_names(dashboard_exprs())
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"] == "deskcomm-event-bus"
    for panel in (p for p in dashboard["panels"] if p["type"] != "row"):
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]


@pytest.mark.django_db
def test_rules_and_dashboard_use_only_metrics_we_export() -> None:
    exported = set(re.findall(r"^# HELP (\S+)", exposition().decode(), flags=re.MULTILINE))
    used = metric_names([rule["expr"] for rule in rules()] + dashboard_exprs())
    assert used <= exported, sorted(used - exported)
