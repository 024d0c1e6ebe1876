"""The pipeline editor and an execution in a real browser (headless Chromium) at 1280 px: the
editor starts with a valid skeleton, refuses a host off the allowlist naming the node and the
host, keeps the definition as typed (order and layout), the graph is drawn, the failed step is
shown, nothing scrolls sideways.

Skipped, with the reason, where Chromium or ChromeDriver is missing (a failure under CI=true).
"""

from __future__ import annotations

from typing import Any

from crm.services import order_confirm
from eventbus.store.models import EventLog
from pipelines import engine, services
from pipelines.context import order_context
from pipelines.models import AllowedHost, Execution, Pipeline
from tests.support.browser import Console, open_add_form
from tests.support.pipelines import AUTHORED, seed_example


def test_editor_graph_and_execution_read_well_at_1280_px(
    live_server: Any, transactional_db: None, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    from core.models import Organization

    browser.set_window_size(1280, 900)
    open_add_form(browser, live_server.url, "/admin/pipelines/pipeline/add/")
    org = Organization.objects.get(slug="acme")
    console = Console(browser, live_server.url)
    browser.find_element(By.NAME, "name").send_keys("ERP")
    browser.find_element(By.NAME, "trigger").send_keys("order.post")
    definition = browser.find_element(By.NAME, "definition")
    assert '"type": "start"' in definition.get_attribute("value")  # a skeleton, not null
    definition.clear()
    definition.send_keys('{"nodes": [{"id": "start", "type": "start"}], "edges": [{"from": "start"')
    browser.find_element(By.NAME, "_save").click()
    console.wait_for_text("Enter a valid JSON")

    definition = browser.find_element(By.NAME, "definition")
    definition.clear()
    definition.send_keys(AUTHORED)
    browser.find_element(By.NAME, "_save").click()
    console.wait_for_text("node 'notify': host 'erp.example.com' is not on this organization's")
    assert browser.find_element(By.NAME, "definition").get_attribute("value") == AUTHORED
    console.shot("pipeline-host-refused", width=1280)
    AllowedHost.objects.create(organization=org, host="erp.example.com")
    browser.find_element(By.NAME, "_save").click()
    console.wait_for_text("was added successfully")
    authored = Pipeline.objects.get(name="ERP")
    console.open(f"/admin/pipelines/pipeline/{authored.pk}/change/")
    assert console.find("textarea[name=definition]").get_attribute("value") == AUTHORED
    authored.delete()  # the next one runs on the same trigger

    pipeline = services.pipeline_create(
        organization=org,
        name="ERP",
        trigger="order.post",
        definition=seed_example("http://127.0.0.1:9/orders"),  # discard port: nothing listens
        actor="test",
    )
    console.open(f"/admin/pipelines/pipeline/{pipeline.pk}/change/")
    svg = console.find("svg.pipeline-graph")
    assert len(svg.find_elements(By.CSS_SELECTOR, "g.node")) == 3
    assert len(svg.find_elements(By.CSS_SELECTOR, "line.edge")) == 2
    assert console.horizontal_overflow() == 0
    console.shot("pipeline-change", width=1280)

    order = order_confirm(organization=org, number="B-1", total_cents=100)
    event = EventLog.objects.get(event_type="order.confirmed")
    engine.run(pipeline, context=order_context(event.payload), event_id=event.id, order_id=order.pk)
    execution = Execution.objects.get()
    console.open(f"/admin/pipelines/execution/{execution.pk}/change/")
    console.wait_for_text("FAILED")
    console.wait_for_text("notify")
    assert console.horizontal_overflow() == 0
    console.shot("pipeline-execution", width=1280)
