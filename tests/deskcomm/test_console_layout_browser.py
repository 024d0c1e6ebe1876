"""Every page of the admin console at a laptop's 1280x800 in a real browser (headless Chromium):
nothing cut off on the right, no list that scrolls sideways, the index's link names on one line.

The walk starts at the admin index as a superuser and opens every link it lists (each model's
list and the Operations box's pages), each list with rows in it (tests/support/console_rows.py:
long ids, URLs, reasons and errors). A screenshot of each page goes to test-artifacts/admin/
(`layout-*.png`). One browser for the module (tests/support/browser.py: `module_browser`).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from core.models import Organization
from eventbus.store.models import EventLog
from tests.support import console_rows
from tests.support.browser import Console, log_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "pw-Console-1"  # pragma: allowlist secret
LAPTOP = (1280, 800)
INDEX_LINKS = "#content-main .module th[scope=row] a"
# The link names (of `arguments[0]`) printed on more than one line.
WRAPPED_LINKS_JS = """
return [...document.querySelectorAll(arguments[0])]
  .filter(a => a.getClientRects().length !== 1
    || a.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(a).lineHeight))
  .map(a => a.textContent);
"""


@pytest.fixture
def ui(module_browser: Any, live_server: Any, org: Organization) -> Console:
    """Rows in every list, a superuser logged in, the window at 1280x800."""
    console_rows.fill(org)
    User.objects.create_superuser("ops", "ops@example.com", PASSWORD)
    module_browser.delete_all_cookies()
    module_browser.set_window_size(*LAPTOP)
    log_in(module_browser, live_server.url, "ops", PASSWORD)
    return Console(module_browser, live_server.url)


def test_the_index_prints_each_link_name_on_one_line(ui: Console) -> None:
    for width, height in (LAPTOP, (1920, 1080)):
        ui.driver.set_window_size(width, height)
        ui.open("/admin/")
        ui.wait_for_text("Operations")
        broken = ui.driver.execute_script(WRAPPED_LINKS_JS, "#operations-module th a")
        assert broken == [], f"at {width} px these link names wrap: {broken}"
        assert ui.hidden_content() == [], width
        assert ui.find("#ops-counts").text  # the numbers an operator opens on
        ui.shot(f"layout-index-{width}", width=width)


def test_every_page_the_index_links_fits_1280_px(ui: Console) -> None:
    ui.open("/admin/")
    ui.wait_for_text("Operations")
    elements = ui.driver.find_elements(ui.by.CSS_SELECTOR, INDEX_LINKS)
    pages = list(dict.fromkeys(str(a.get_attribute("href")) for a in elements))
    assert len(pages) > 40, pages  # every registered model and the operations pages
    problems: dict[str, list[str]] = {}
    for url in pages:
        path = url.removeprefix(ui.base)
        ui.driver.set_window_size(*LAPTOP)
        ui.driver.get(url)
        ui.find("#content")
        found = ui.hidden_content()
        if ui.driver.find_elements(ui.by.CSS_SELECTOR, "#changelist") and not (
            ui.driver.find_elements(ui.by.CSS_SELECTOR, "#result_list tbody tr")
        ):
            found.append("no rows to show (tests/support/console_rows.py makes some)")
        if found:
            problems[path] = found
        ui.shot("layout-" + path.strip("/").replace("/", "-"), width=LAPTOP[0])
    assert problems == {}, "\n".join(f"{page}: {found}" for page, found in problems.items())

    # A long id is cut to its column with the whole id in the tooltip; the navigation sidebar,
    # opened, lies over the list instead of pushing it out of the window.
    ui.open("/admin/eventbus/delivery/")
    clip = ui.find("td.field-event_link .dc-clip")
    events = {str(pk) for pk in EventLog.objects.values_list("pk", flat=True)}
    assert clip.get_attribute("title") in events
    ui.find("#toggle-nav-sidebar").click()
    ui.wait.until(lambda d: ui.find("#nav-sidebar").is_displayed())
    assert ui.hidden_content() == []
    ui.shot("layout-nav-sidebar-open", width=LAPTOP[0])
