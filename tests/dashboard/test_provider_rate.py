"""The providers page says, per provider, whether it follows its headers (adaptive, and which), whether
it has the batch API, and what holds it below its configured rate, with the cause."""

from __future__ import annotations

import re
from types import SimpleNamespace

from django.urls import reverse

from dashboard.selectors.provider_rate import rate_status
from tests.factories import login_superuser


def _row(body: str, name: str) -> str:
    match = re.search(rf'<tr data-provider="{name}"><td><b>{name}</b></td>(.*?)</tr>', body, re.S)
    assert match, name
    return match.group(1)


def test_the_page_shows_adaptive_batch_api_and_nothing_holding_a_provider_at_rest(client, make_provider):
    make_provider("az", kind="azure_openai", api_version="2024-10-21", burst_seconds=1.0)
    make_provider("gem", kind="gemini")
    make_provider("oai", adaptive=False, batch_api=True)
    body = login_superuser(client).get(reverse("dashboard:providers")).content.decode()
    assert 'id="provider-rate"' in body
    az = _row(body, "az")
    assert "on: follows tokens (requests: a 1–10 s window count, not followed)" in az
    assert "nothing: it may run at its configured rate" in az
    assert "off: the provider sends no remaining-quota headers" in _row(body, "gem")
    oai = _row(body, "oai")
    assert "off (configured)" in oai and '<td class="small batch-api">on</td>' in oai


def test_each_cause_of_running_below_the_configured_rate_is_named():
    provider = SimpleNamespace(name="p", kind="openai", adaptive=True, batch_api=False, enabled=True,
                               rpm=600, tpm=100_000)  # fmt: skip
    quota = SimpleNamespace(adjusted_rpm=120.0, adjusted_tpm=None, outside_rpm=480.0, outside_tpm=0.0,
                            paused_until_ms=1500)  # fmt: skip
    pause = SimpleNamespace(reason="per_day_quota", message="quota exhausted")
    row = {"quota": quota, "pause": pause, "breaker": "open", "breaker_detail": "5 failures in 60 s"}
    status = rate_status(provider, row)
    assert status.adaptive == "on: follows requests and tokens"
    assert status.below == (
        "its headers: RPM held at 120/min of the configured 600/min until their reset (shared key; "
        "outside use about 480/min)",
        "a 429's Retry-After: no request until it has passed",
        "paused (per_day_quota: quota exhausted)",
        "breaker open: 5 failures in 60 s",
    )
    assert rate_status(provider, {"quota": None}).below == ()
    assert rate_status(SimpleNamespace(**{**vars(provider), "kind": "mystery"}), {}).adaptive == (
        "off: the meaning of kind mystery's remaining-quota headers is not known"
    )
