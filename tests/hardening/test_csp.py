"""Content-Security-Policy on admin and dashboard pages (#29, django-csp): the pages' own static scripts and
styles, nothing inline, nothing from elsewhere — and the pages still work under it in a real browser.

Pre-fix: no Content-Security-Policy header at all, and the pages carried inline <style>/<script> blocks,
an onclick handler and style attributes that such a policy would block.
"""

from __future__ import annotations

import os
import re
import shutil
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from tests.dashboard.pages import all_pages

EXPECTED = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'self'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}
PASSWORD = "csp-pass-123456"


def directives(header: str) -> dict[str, str]:
    out = {}
    for part in header.split(";"):
        name, _, value = part.strip().partition(" ")
        if name:
            out[name] = value.strip()
    return out


class InlineFinder(HTMLParser):
    """What a strict policy blocks in a page: inline <script>/<style>, on* handlers, style attributes,
    javascript: URLs, and resources from another origin."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "script" and not attrs.get("src"):
            self._in = "script"
        if tag == "style":
            self.found.append("<style> block")
        for name, value in attrs.items():
            if name.startswith("on"):
                self.found.append(f"<{tag} {name}=...>")
            if name == "style":
                self.found.append(f"<{tag} style={value!r}>")
            if name in ("href", "src") and value and value.strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}=javascript:...>")
            if name in ("src",) and value and re.match(r"^(https?:)?//", value):
                self.found.append(f"<{tag} src={value!r}> (another origin)")
        if tag == "link" and re.match(r"^(https?:)?//", attrs.get("href") or ""):
            self.found.append(f"<link href={attrs['href']!r}> (another origin)")

    def handle_data(self, data):
        if self._in == "script" and data.strip():
            self.found.append("inline <script>: " + data.strip()[:60])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in = None


def inline_parts(html: str) -> list[str]:
    finder = InlineFinder()
    finder.feed(html)
    return finder.found


@pytest.fixture
def seeded(db, monkeypatch):
    from tests.dashboard.seed import ENV_SECRET, seed

    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    return seed()


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("csp-admin", "csp@example.com", PASSWORD)
    client.force_login(user)
    return client


def admin_pages(seeded) -> dict[str, str]:
    from teams.models import ApiKey
    from teams.services import create_api_key

    team = seeded.teams["acme"]
    key = ApiKey.objects.filter(team=team).first() or create_api_key(team, "csp")[0]
    provider = seeded.providers["alpha"]
    return {
        "admin_index": reverse("admin:index"),
        "admin_provider_list": reverse("admin:providers_provider_changelist"),
        "admin_provider_change": reverse("admin:providers_provider_change", args=[provider.pk]),
        "admin_team_change": reverse("admin:teams_team_change", args=[team.pk]),
        "admin_apikey_list": reverse("admin:teams_apikey_changelist"),
        "admin_apikey_add": reverse("admin:teams_apikey_add"),
        "admin_apikey_change": reverse("admin:teams_apikey_change", args=[key.pk]),
        "admin_batch_list": reverse("admin:batches_batch_changelist"),
        "admin_batch_change": reverse("admin:batches_batch_change", args=[seeded.completed.pk]),
        "admin_user_list": reverse("admin:auth_user_changelist"),
    }


def test_admin_and_dashboard_pages_send_the_policy_and_carry_nothing_it_blocks(seeded, admin_client):
    pages = all_pages(seeded)
    pages.pop("usage_csv")
    pages.update(admin_pages(seeded))
    problems = []
    for name, path in pages.items():
        response = admin_client.get(path)
        assert response.status_code == 200, (name, response.status_code)
        header = response.get("Content-Security-Policy")
        if header is None:
            problems.append(f"{name}: no Content-Security-Policy header")
            continue
        policy = directives(header)
        for directive, value in EXPECTED.items():
            if policy.get(directive) != value:
                problems.append(f"{name}: {directive} is {policy.get(directive)!r}, not {value!r}")
        if "unsafe-inline" in header or "unsafe-eval" in header:
            problems.append(f"{name}: unsafe-* in {header!r}")
        problems += [f"{name}: {part}" for part in inline_parts(response.content.decode())]
    assert problems == [], "\n".join(problems)


def test_the_login_page_and_the_new_key_page_too(seeded, admin_client, client):
    from teams.models import Team

    login = client.get(reverse("admin:login"))
    assert "Content-Security-Policy" in login
    team = Team.objects.first()
    created = admin_client.post(
        reverse("admin:teams_apikey_add"), {"team": team.pk, "name": "csp-key"}, follow=True
    )
    assert created.status_code == 200 and b"new-api-key" in created.content
    assert "Content-Security-Policy" in created
    assert inline_parts(created.content.decode()) == []
    assert b"data-select-on-click" in created.content  # was onclick="this.select()"


def test_swagger_ui_is_left_without_the_policy_and_json_gets_it(client, db):
    """drf-spectacular's Swagger UI page needs its inline script (excluded by path); API answers carry
    the header too, harmlessly."""
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and "Content-Security-Policy" not in docs
    assert "Content-Security-Policy" in client.get("/api/v1/batches")


# --- a real browser: no CSP violation, and the pages' own scripts ran --------------------------------

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
# Records every securitypolicyviolation event of the document, from its very start.
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"} (${e.sourceFile}:${e.lineNumber})`);
});
"""


def _require_browser():
    if not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("CI"):
            pytest.fail("Chromium is not installed (/usr/bin/chromium) — required when CI is set")
        pytest.skip("Chromium is not installed (/usr/bin/chromium; scripts/ensure_chromium.sh)")
    try:
        import playwright.sync_api as api
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the playwright package is not installed — required when CI is set")
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    return api


@pytest.fixture
def browser_seed(transactional_db, monkeypatch):
    from tests.dashboard.seed import ENV_SECRET, seed

    monkeypatch.setenv("GATEWAY_PROVIDER_SECRET_BETA", ENV_SECRET)
    data = seed()
    get_user_model().objects.create_superuser("csp-browser", "b@example.com", PASSWORD)
    return data


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_chromium_sees_no_violation_on_dashboard_and_admin_pages(live_server, browser_seed):
    api = _require_browser()
    pages = {
        "batch_running": reverse("dashboard:batch_detail", args=[browser_seed.running.pk]),
        "providers": reverse("dashboard:providers"),
        "usage": reverse("dashboard:usage"),
        "admin_provider_list": reverse("admin:providers_provider_changelist"),
        "admin_apikey_add": reverse("admin:teams_apikey_add"),
    }
    team_name = browser_seed.teams["acme"].name
    problems: list[str] = []
    with api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            context.add_init_script(RECORD_VIOLATIONS)
            page = context.new_page()
            page.set_default_timeout(15_000)
            current = {"name": "login"}
            page.on(
                "console",
                lambda msg: (
                    problems.append(f"{current['name']}: console {msg.type}: {msg.text}")
                    if msg.type == "error" or "Content Security Policy" in msg.text
                    else None
                ),
            )
            page.on("pageerror", lambda exc: problems.append(f"{current['name']}: page error: {exc}"))

            def violations() -> list[str]:
                return [f"{current['name']}: {v}" for v in page.evaluate("window.__csp || []")]

            login = page.goto(live_server.url + reverse("admin:login"))
            assert login is not None and "content-security-policy" in login.headers
            page.fill("#id_username", "csp-browser")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(live_server.url + reverse("admin:index"))
            problems += violations()

            for name, path in pages.items():
                current["name"] = name
                response = page.goto(live_server.url + path, wait_until="load")
                assert response is not None and response.status == 200, name
                policy = directives(response.headers.get("content-security-policy", ""))
                assert policy.get("script-src") == "'self'", (name, policy)
                problems += violations()

                if name == "batch_running":
                    # the progress bar's widths come from dashboard.js (data-pct), not style attributes
                    widths = page.eval_on_selector_all(
                        ".bar.seg > i", "els => els.map(e => e.getBoundingClientRect().width)"
                    )
                    assert widths and sum(widths) > 50, widths
                    assert page.eval_on_selector("svg.chart", "e => e.style.maxWidth").endswith("px")
                    # and the stylesheet applied (a static file, not an inline block)
                    assert page.eval_on_selector("header.top", "e => getComputedStyle(e).display") == "flex"
                if name == "admin_apikey_add":
                    # admin.js: the new key's page gets its copy button; its input selects on click
                    page.select_option("#id_team", label=team_name)
                    page.fill("#id_name", "csp-browser-key")
                    page.click("input[name=_save]")
                    page.wait_for_selector("#content-main code[data-copy]")
                    current["name"] = "apikey_created"
                    assert page.locator("#content-main button.copy-value").count() == 1
                    page.click("#new-api-key")
                    selected = page.evaluate(
                        "() => { const i = document.querySelector('#new-api-key');"
                        " return i.selectionEnd - i.selectionStart; }"
                    )
                    assert selected == len(page.input_value("#new-api-key"))
                    problems += violations()
        finally:
            browser.close()
    assert problems == [], "\n".join(problems)
