"""Real browser: headless Chromium (Debian package) driven by Playwright opens every dashboard page.

Logs in through the admin login form as staff, checks each page for console errors and failed requests,
and saves a full-page screenshot of each into artifacts/screenshots/ (git-ignored).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .pages import all_pages

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.access(CHROMIUM, os.X_OK),
        reason="Chromium is not installed (/usr/bin/chromium); `make test` installs Debian's chromium where apt is available",
    ),
]

PASSWORD = "browser-pass-123"


@pytest.fixture
def browser_seed(transactional_db, monkeypatch):
    from django.contrib.auth import get_user_model

    from .seed import ENV_SECRET, seed

    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    data = seed()
    get_user_model().objects.create_user("browser-ops", password=PASSWORD, is_staff=True)
    return data


@pytest.mark.timeout(180)
def test_every_page_renders_in_chromium_without_console_errors(live_server, browser_seed):
    playwright_api = pytest.importorskip("playwright.sync_api")
    from .seed import DB_SECRET, ENV_SECRET

    # All database work is done above: Playwright's sync API runs an event loop in this thread, and
    # Django refuses ORM calls from there.
    pages = all_pages(browser_seed)
    pages.pop("usage_csv")  # a download, checked by the client tests
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []

    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1440, "height": 900})
            page = context.new_page()
            page.set_default_timeout(15_000)
            current = {"name": "login"}
            page.on(
                "console",
                lambda msg: (
                    problems.append(f"{current['name']}: console {msg.type}: {msg.text}")
                    if msg.type == "error"
                    else None
                ),
            )
            page.on("pageerror", lambda exc: problems.append(f"{current['name']}: page error: {exc}"))
            page.on(
                "response",
                lambda resp: (
                    problems.append(f"{current['name']}: HTTP {resp.status} {resp.url}")
                    if resp.status >= 400
                    else None
                ),
            )

            # anonymous → the dashboard sends the browser to the admin login, which comes back after
            page.goto(live_server.url + pages["batches"])
            assert "/admin/login/" in page.url
            page.fill("#id_username", "browser-ops")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(live_server.url + pages["batches"])
            problems.clear()  # the admin login page is not ours

            for name, path in pages.items():
                current["name"] = name
                response = page.goto(live_server.url + path, wait_until="load")
                assert response is not None and response.status == 200, (
                    f"{name}: {response and response.status}"
                )
                assert page.locator("header.top nav a").count() == 6, name
                html = page.content()
                assert DB_SECRET not in html and ENV_SECRET not in html, name
                page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

            # navigation works by clicking, not only by URL
            current["name"] = "nav"
            page.click("header.top nav >> text=Failures")
            page.wait_for_url("**/dashboard/failures/")
            page.click("header.top nav >> text=Team usage")
            page.wait_for_url("**/dashboard/usage/")
            assert page.locator("svg.chart rect").count() > 10
            with page.expect_download() as download_info:
                page.click("text=Export CSV")
            assert download_info.value.suggested_filename.startswith("team-usage_")
        finally:
            browser.close()

    assert problems == []
    for name in pages:
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 5_000, name
