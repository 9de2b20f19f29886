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

pytestmark = [pytest.mark.browser]
MISSING = (
    "Chromium is not installed (/usr/bin/chromium); `make test` installs Debian's chromium where apt is "
    "available (scripts/ensure_chromium.sh)"
)


def require(what_is_missing: str | None) -> None:
    """In CI (the CI environment variable set) a missing browser part fails the test; elsewhere it
    skips with the reason, so a developer without Chromium still runs the rest."""
    if what_is_missing is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what_is_missing} — required when CI is set", pytrace=False)
    pytest.skip(what_is_missing)


def playwright_sync_api():
    try:
        import playwright.sync_api as api
    except ImportError:
        require("the playwright package is not installed (pip install -e '.[dev]')")
        raise
    return api


@pytest.fixture(autouse=True)
def _chromium_present():
    require(None if os.access(CHROMIUM, os.X_OK) else MISSING)


PASSWORD = "browser-pass-123"


@pytest.fixture
def browser_seed(transactional_db, monkeypatch):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from .seed import ENV_SECRET, seed

    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    data = seed()
    user = get_user_model().objects.create_user("browser-ops", password=PASSWORD, is_staff=True)
    # an operator (the item page shows prompts and answers): the 'gateway operator' group's batch powers,
    # given directly (a flushed transactional database has the permissions back, not the migration's group)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="batches", codename__in=["view_content", "retry_batch", "cancel_batch"]
        )
    )
    return data


@pytest.mark.timeout(180)
def test_every_page_renders_in_chromium_without_console_errors(live_server, browser_seed):
    playwright_api = playwright_sync_api()
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


# --- 1280 px: every dashboard page, Swagger UI, and the admin of every model ------------------------

VIEWPORT = {"width": 1280, "height": 900}

# For each visible element: does it reach past the window's right edge without a box that scrolls on its
# own (overflow-x auto/scroll, itself inside the window) around it? Plus the page's own scroll width and
# list-editable inputs whose value does not fit.
LAYOUT_PROBE = """
() => {
  const vw = window.innerWidth;
  const scrollBox = (el) => {
    for (let p = el.parentElement; p && p !== document.documentElement; p = p.parentElement) {
      const ox = getComputedStyle(p).overflowX;
      if ((ox === "auto" || ox === "scroll") && p.getBoundingClientRect().right <= vw + 1) return true;
    }
    return false;
  };
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
    (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\\s+/).join(".") : "");
  const offenders = [];
  for (const el of document.body.querySelectorAll("*")) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || getComputedStyle(el).visibility === "hidden") continue;
    if (r.right > vw + 1 && !scrollBox(el)) offenders.push(name(el) + " right=" + Math.round(r.right));
  }
  const ctx = document.createElement("canvas").getContext("2d");
  const cut = [];
  for (const input of document.querySelectorAll("#result_list input[type=number], #result_list input[type=text]")) {
    const s = getComputedStyle(input);
    ctx.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const room = input.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight)
      - (input.type === "number" ? 16 : 0);
    if (ctx.measureText(input.value).width > room) cut.push(input.name + "=" + input.value);
  }
  // admin changelists and dashboard tables show every column at 1280 px without sideways scrolling
  const hiddenColumns = [];
  for (const box of document.querySelectorAll("#changelist .results, .tablewrap")) {
    if (box.scrollWidth <= box.clientWidth + 1) continue;
    const edge = box.getBoundingClientRect().right + 1;
    hiddenColumns.push(...[...box.querySelectorAll("thead th")]
      .filter((th) => th.getBoundingClientRect().right > edge).map((th) => th.innerText.trim()));
  }
  // chart labels: the SVG font size times the drawing's scale on screen
  const chartFonts = [...document.querySelectorAll("svg.chart text")].map((t) => {
    const svg = t.ownerSVGElement;
    return parseFloat(t.getAttribute("font-size")) * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  });
  const smallestChartFont = chartFonts.length ? Math.min(...chartFonts) : null;
  // a field error in a list-editable cell is a readable block, not a sliver of one word per line
  const slivers = [...document.querySelectorAll("#result_list ul.errorlist")]
    .filter((ul) => ul.getBoundingClientRect().width < 150).map((ul) => ul.innerText);
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth: vw, hiddenColumns, smallestChartFont, slivers,
          offenders: offenders.slice(0, 10), cutInputs: cut};
}
"""


def _admin_pages(seeded, edge) -> dict[str, str]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.urls import reverse

    from batches.models import TeamUsageDaily
    from providers.models import RoutingRule
    from teams.models import ApiKey

    user = get_user_model().objects.get(username="browser-admin")
    group = Group.objects.get_or_create(name="operators")[0]
    key = ApiKey.objects.filter(team=edge.long_team).first()
    objects = {
        "providers_provider": edge.wide_provider,
        "providers_routingrule": RoutingRule.objects.filter(provider=edge.wide_provider).first(),
        "teams_team": edge.long_team,
        "teams_apikey": key,
        "batches_batch": edge.cancelled,
        "batches_batchitem": edge.long_item,
        "batches_teamusagedaily": TeamUsageDaily.objects.first(),
        "auth_user": user,
        "auth_group": group,
    }
    pages = {"admin_index": reverse("admin:index")}
    for model, obj in objects.items():
        pages[f"admin_{model}_list"] = reverse(f"admin:{model}_changelist")
        pages[f"admin_{model}_change"] = reverse(f"admin:{model}_change", args=[obj.pk])
    for model in ("providers_provider", "teams_apikey", "teams_team", "providers_routingrule"):
        pages[f"admin_{model}_add"] = reverse(f"admin:{model}_add")
    return pages


@pytest.fixture
def wide_seed(transactional_db, monkeypatch):
    from django.contrib.auth import get_user_model

    from teams.services import create_api_key

    from .seed import ENV_SECRET, add_edge_cases, seed

    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    seeded = seed()
    edge = add_edge_cases(seeded)
    create_api_key(edge.long_team, "a-key-with-a-rather-long-name-for-the-admin-columns")
    get_user_model().objects.create_superuser("browser-admin", "admin@example.com", PASSWORD)
    return seeded, edge


@pytest.mark.timeout(240)
def test_every_page_fits_1280_px_without_console_errors(live_server, wide_seed):
    playwright_api = playwright_sync_api()
    from django.urls import reverse

    seeded, edge = wide_seed
    pages = all_pages(seeded)
    pages.pop("usage_csv")
    pages.update(
        {
            "batch_cancelled": reverse("dashboard:batch_detail", args=[edge.cancelled.pk]),
            "batch_all_succeeded": reverse("dashboard:batch_detail", args=[edge.all_succeeded.pk]),
            "item_long_lines": reverse("dashboard:item_detail", args=[edge.long_item.pk]),
            "swagger_ui": "/api/docs/",
        }
    )
    pages.update(_admin_pages(seeded, edge))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []

    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(15_000)
            current = {"name": "login"}
            page.on(
                "console",
                lambda msg: (
                    problems.append(f"{current['name']}: console: {msg.text}")
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
            page.goto(live_server.url + reverse("admin:login"))
            page.fill("#id_username", "browser-admin")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(live_server.url + reverse("admin:index"))

            def check(name: str) -> None:
                layout = page.evaluate(LAYOUT_PROBE)
                if layout["scrollWidth"] > layout["innerWidth"]:
                    problems.append(f"{name}: page is {layout['scrollWidth']} px wide")
                if layout["offenders"]:
                    problems.append(f"{name}: past the right edge: {layout['offenders']}")
                if layout["hiddenColumns"]:
                    problems.append(f"{name}: columns need sideways scrolling: {layout['hiddenColumns']}")
                if layout["smallestChartFont"] is not None and layout["smallestChartFont"] < 11.5:
                    problems.append(f"{name}: chart labels {layout['smallestChartFont']:.1f} px high")
                if layout["slivers"]:
                    problems.append(
                        f"{name}: field errors squeezed into a narrow column: {layout['slivers']}"
                    )
                if layout["cutInputs"]:
                    problems.append(f"{name}: cut-off input values: {layout['cutInputs']}")
                page.screenshot(path=str(SCREENSHOTS / f"1280_{name}.png"), full_page=True)

            for name, path in pages.items():
                current["name"] = name
                response = page.goto(live_server.url + path, wait_until="load")
                assert response is not None and response.status == 200, (
                    f"{name}: {response and response.status}"
                )
                if name == "swagger_ui":
                    page.wait_for_selector(".opblock", timeout=15_000)
                check(name)

            # the list-editable TPM shows 10000000 whole, and the widgets refuse <= 0 in the browser
            current["name"] = "provider_list_editable"
            page.goto(live_server.url + pages["admin_providers_provider_list"])
            tpm = page.locator(
                f"#result_list tr:has-text('{edge.wide_provider.name[:40]}') input[name$='-tpm']"
            )
            assert tpm.input_value() == "10000000"
            assert tpm.get_attribute("min") == "1"
            rpm = page.locator("#result_list input[name$='-rpm']").first
            assert rpm.get_attribute("min") == "1"
            rpm.fill("0")
            assert page.evaluate("el => el.validationMessage", rpm.element_handle()) != ""
            # the server's answer to -5 (browser validation off): one message, readable in its cell
            current["name"] = "provider_list_error"
            page.evaluate("document.querySelector('#changelist-form').noValidate = true")
            rpm.fill("-5")
            page.click("#changelist-form input[name=_save]")
            page.wait_for_selector("#result_list ul.errorlist")
            assert (
                page.inner_text("#result_list ul.errorlist")
                == "Ensure this value is greater than or equal to 1."
            )
            check("provider_list_error")

            # the provider change page shows the env var name with its <NAME> placeholder
            page.goto(live_server.url + pages["admin_providers_provider_change"])
            assert "GATEWAY_PROVIDER_SECRET_<NAME>" in page.inner_text("#provider_form")

            # a new API key is shown once with a copy button, and the message fits the page
            current["name"] = "apikey_created"
            page.goto(live_server.url + pages["admin_teams_apikey_add"])
            page.select_option("#id_team", label=edge.long_team.name)
            page.fill("#id_name", "browser")
            page.click("input[name=_save]")
            # its own no-store page (never the messages cookie), with a copy button
            page.wait_for_selector("#content-main code[data-copy]")
            assert page.locator("#content-main code[data-copy]").count() == 1
            assert page.locator("#content-main button.copy-value").count() == 1
            check("apikey_created")
            page.click("#content-main a.button:has-text('Done')")
            page.wait_for_selector("#result_list thead")
            with_headers = page.inner_text("#result_list thead")
            for column in ("NAME", "LAST USED", "REVOKED AT"):
                assert column in with_headers.upper(), column

            # every item of an all-succeeded batch is reachable from its page
            current["name"] = "batch_all_succeeded_items"
            page.goto(live_server.url + pages["batch_all_succeeded"])
            links = page.locator("#items ~ .tablewrap a:has-text('request / response')")
            assert links.count() == 12
            links.first.click()
            page.wait_for_url("**/dashboard/items/**")
            assert "word word" in page.inner_text("pre")
        finally:
            browser.close()

    assert problems == [], "\n".join(problems)


# --- admin forms filled with the largest allowed values ------------------------------------------------

# Number inputs whose value does not fit the box: the browser scrolls the text inside it (scrollWidth >
# clientWidth), or the digits are wider than the room left by the padding and the spinner.
CLIPPED_INPUTS = """
(largest) => {
  const ctx = document.createElement("canvas").getContext("2d");
  const filled = [], clipped = [];
  for (const input of document.querySelectorAll("#content-main form input[type=number]")) {
    // "tpm" (the page's model) or "routes-0-weight" (an inline's model, by its formset prefix)
    const parts = input.name.split("-");
    const values = largest[parts.length > 1 ? parts[0] : ""] || {};
    const field = parts[parts.length - 1];
    if (input.name.includes("__prefix__") || !(field in values) || input.disabled) continue;
    input.value = values[field];
    input.dispatchEvent(new Event("input", {bubbles: true}));
    filled.push(input.name);
    const s = getComputedStyle(input);
    ctx.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const room = input.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight) - 16;
    const digits = ctx.measureText(input.value).width;
    if (input.scrollWidth > input.clientWidth || digits > room)
      clipped.push(`${input.name}=${input.value} (box ${input.clientWidth} px, digits ${Math.round(digits)} px)`);
  }
  return {filled, clipped};
}
"""


def largest_allowed_values(model) -> dict[str, str]:
    """Per number field of ``model``: the largest value it accepts (validators, digits, the database
    column's range), as typed into the form."""
    from decimal import Decimal

    from django.core.validators import MaxValueValidator
    from django.db import connection, models

    largest: dict[str, str] = {}
    for field in model._meta.concrete_fields:
        if isinstance(field, models.AutoField | models.ForeignKey) or not field.editable:
            continue
        highs = [v.limit_value for v in field.validators if isinstance(v, MaxValueValidator)]
        if isinstance(field, models.DecimalField):
            places = field.decimal_places
            highs.append(Decimal(10) ** (field.max_digits - places) - Decimal(10) ** -places)
        elif isinstance(field, models.IntegerField):
            highs.append(connection.ops.integer_field_range(field.get_internal_type())[1])
        elif not isinstance(field, models.FloatField):
            continue
        highs = [h for h in highs if h is not None]
        if highs:
            value = min(highs)
            largest[field.name] = f"{value:f}" if isinstance(value, Decimal) else str(value)
    return largest


def largest_values_per_form(model) -> dict[str, dict[str, str]]:
    """{formset prefix or "" for the page's own form: {field: largest value}} for an admin page of model."""
    from django.contrib import admin
    from django.forms.models import _get_foreign_key

    out = {"": largest_allowed_values(model)}
    model_admin = admin.site._registry.get(model)
    for inline in getattr(model_admin, "inlines", []):
        prefix = _get_foreign_key(
            model, inline.model, fk_name=inline.fk_name
        ).remote_field.get_accessor_name()
        out[prefix] = largest_allowed_values(inline.model)
    return out


@pytest.mark.timeout(240)
def test_admin_forms_show_the_largest_allowed_values_whole(live_server, wide_seed):
    """Every admin change and add form, every number input filled with the largest value its model field
    allows (Provider tpm 1,000,000,000, rpm 1,000,000, prices 99999999.9999, …): no digit is cut off."""
    playwright_api = playwright_sync_api()
    from django.apps import apps
    from django.urls import reverse

    seeded, edge = wide_seed
    pages = {k: v for k, v in _admin_pages(seeded, edge).items() if k.endswith(("_change", "_add"))}
    largest = {}
    for name in pages:
        app_label, _, model_name = name.removeprefix("admin_").rsplit("_", 1)[0].partition("_")
        largest[name] = largest_values_per_form(apps.get_model(app_label, model_name))
    provider = largest["admin_providers_provider_change"]
    assert provider[""]["tpm"] == "1000000000" and provider["routes"]["weight"] == "1000000"
    problems: list[str] = []
    filled: set[str] = set()
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.set_default_timeout(15_000)
            page.goto(live_server.url + reverse("admin:login"))
            page.fill("#id_username", "browser-admin")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(live_server.url + reverse("admin:index"))
            for name, path in pages.items():
                response = page.goto(live_server.url + path, wait_until="load")
                assert response is not None and response.status == 200, (name, response and response.status)
                found = page.evaluate(CLIPPED_INPUTS, largest[name])
                filled.update(f"{name}:{n}" for n in found["filled"])
                problems += [f"{name}: {c}" for c in found["clipped"]]
                page.screenshot(path=str(SCREENSHOTS / f"largest_{name}.png"), full_page=True)
        finally:
            browser.close()
    # the forms with numbers were really filled: the provider's quota and its routes, the team's limits
    for expected in ("admin_providers_provider_change:tpm", "admin_providers_provider_add:tpm",
                     "admin_teams_team_change:daily_token_budget", "admin_providers_routingrule_change:weight"):  # fmt: skip
        assert expected in filled, sorted(filled)
    assert problems == [], "\n".join(problems)
