"""Provider pauses (issue #21) against the real quota store (Redis): the engine pauses a provider whose
account is out of quota; operators see it (providers page, gateway_provider_paused) and clear it
(manage.py clear_provider_pause, the admin action), each recorded in the audit history."""

from __future__ import annotations

import asyncio
import logging
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from audit.models import ConfigChange
from providers.limits.factory import provider_pauses_sync, run_with_store
from tests.factories import login_staff, login_superuser

BILLING = "Your credit balance is too low to access the Anthropic API."


def pause(name: str, reason: str = "billing", until: float | None = None, message: str = BILLING) -> None:
    run_with_store(lambda store: store.pause_provider(name, reason, until, message))


def paused(name: str):
    return run_with_store(lambda store: store.provider_pause(name))


@pytest.fixture
def claude(make_provider):
    provider = make_provider("claude", kind="anthropic")
    yield provider
    run_with_store(lambda store: store.lift_provider_pause("claude"))


def test_the_command_clears_the_pause_says_what_it_was_and_records_it(claude):
    pause("claude")
    out = StringIO()
    call_command("clear_provider_pause", "claude", stdout=out)
    assert "cleared the pause of provider claude: billing until cleared" in out.getvalue()
    assert BILLING in out.getvalue()
    assert paused("claude") is None
    entry = ConfigChange.objects.get(action="pause cleared")
    assert (entry.actor, entry.via, entry.model, entry.object_id) == (
        "system", "command:clear_provider_pause", "provider", str(claude.pk),
    )  # fmt: skip
    assert entry.changes["provider_pause"]["old"] == {
        "reason": "billing",
        "until_epoch": None,
        "message": BILLING,
    }


def test_the_command_fails_for_an_unknown_provider_or_no_pause(claude):
    with pytest.raises(CommandError, match=r"unknown provider 'nope' \(known: claude\)"):
        call_command("clear_provider_pause", "nope", stdout=StringIO())
    with pytest.raises(CommandError, match="provider claude has no pause to clear"):
        call_command("clear_provider_pause", "claude", stdout=StringIO())
    assert not ConfigChange.objects.filter(action="pause cleared").exists()


def _action(client, provider, name="clear_provider_pause"):
    url = reverse("admin:providers_provider_changelist")
    return client.post(url, {"action": name, "_selected_action": [str(provider.pk)]}, follow=True)


def test_the_admin_action_clears_the_pause_and_is_audited_with_the_user(client, claude, make_provider):
    other = make_provider("oai")
    pause("claude", "per_day_quota", until=4102444800.0, message="requests per day")
    staff = login_superuser(client)
    page = staff.get(reverse("admin:providers_provider_changelist")).content.decode()
    assert "Clear the provider pause (quota exhausted / per-day)" in page
    assert "Clear the rate-limit pause (429) now" in page
    body = _action(staff, claude).content.decode().lower()  # the admin capitalizes messages
    assert "provider pause cleared: claude (per_day_quota until 2100-01-01 00:00:00 utc" in body
    assert paused("claude") is None
    entry = ConfigChange.objects.get(action="pause cleared")
    assert (entry.via, entry.object_repr) == ("admin", "claude")
    assert entry.actor == "ops"
    assert "no provider pause to clear: oai" in _action(staff, other).content.decode().lower()


def test_the_action_needs_the_change_permission_like_the_429_one(client, claude):
    pause("claude")
    ops = login_staff(client, "view_provider")
    page = ops.get(reverse("admin:providers_provider_changelist")).content.decode()
    assert "Clear the provider pause" not in page and "Clear the rate-limit pause" not in page
    _action(ops, claude)
    assert paused("claude") is not None


def test_the_providers_page_shows_the_pause_with_reason_message_and_kind(client, claude, make_provider):
    make_provider("gem", kind="gemini")
    pause("claude")
    pause("gem", "per_day_quota", until=4102444800.0, message="GenerateRequestsPerDayPerProjectPerModel")
    body = login_superuser(client).get(reverse("dashboard:providers")).content.decode()
    assert "quota exhausted" in body and f"billing: {BILLING}" in body.replace("&#x27;", "'")
    assert "paused until 2100-01-01 00:00:00 UTC" in body
    assert "per_day_quota: GenerateRequestsPerDayPerProjectPerModel" in body
    assert ">anthropic<" in body and ">gemini<" in body
    run_with_store(lambda store: store.lift_provider_pause("gem"))


def _families():
    from observability.collector import LiveStateCollector

    return {family.name: family for family in LiveStateCollector().collect()}


def test_the_metric_is_one_for_a_paused_provider_and_zero_for_the_others(claude, make_provider):
    make_provider("oai")
    pause("claude")
    families = _families()
    samples = {tuple(s.labels.values()): s.value for s in families["gateway_provider_paused"].samples}
    assert samples == {("claude", "billing"): 1, ("oai", "none"): 0}
    errors = {s.labels["source"]: s.value for s in families["gateway_scrape_errors"].samples}
    assert errors["pauses"] == 0
    assert provider_pauses_sync(["claude", "oai"]).keys() == {"claude"}


@pytest.mark.django_db(transaction=True)
def test_the_observer_hook_logs_loudly_and_audits_the_pause(make_provider, caplog):
    """on_provider_paused runs on the engine's event loop: its audit write goes through a thread."""
    from observability.engine import GatewayObserver, PauseOnlyObserver

    claude = make_provider("claude", kind="anthropic")

    async def engine_side(observer):
        observer.on_provider_paused("claude", "billing", None, BILLING)

    with caplog.at_level(logging.ERROR, logger="providers.pauses"):
        asyncio.run(engine_side(GatewayObserver("b-1", "acme")))
        asyncio.run(engine_side(PauseOnlyObserver("b-2")))  # metrics off: still logged and audited
    events = [r for r in caplog.records if getattr(r, "event", "") == "provider_paused"]
    assert len(events) == 2 and events[0].levelno == logging.ERROR
    assert (events[0].provider, events[0].reason, events[0].until_epoch) == ("claude", "billing", None)
    assert events[0].detail == BILLING and events[1].batch_id == "b-2"
    entries = ConfigChange.objects.filter(action="paused")
    assert entries.count() == 2
    assert {(e.object_id, e.via, e.changes["provider_pause"]["new"]["reason"]) for e in entries} == {
        (str(claude.pk), "code", "billing")
    }


def test_the_durable_record_is_written_never_shortened_and_cleared_with_the_pause(claude):
    """providers.ProviderPause: the engine's hook writes it, a shorter pause does not replace it, and
    clearing removes it too — also when only the record held the pause (Redis lost it)."""
    from gateway_engine.quota.types import PauseState
    from providers import pauses
    from providers.models import ProviderPause

    pauses.record_paused("claude", PauseState("claude", "billing", None, BILLING))
    pauses.record_paused("claude", PauseState("claude", "per_day_quota", 4102444800.0, "per day"))
    row = ProviderPause.objects.get(provider=claude)
    assert (row.reason, row.until, row.message) == ("billing", None, BILLING)
    assert pauses.durable_pauses()["claude"].reason == "billing"
    assert paused("claude") is None  # the store never had it here (as after a Redis restart)
    out = StringIO()
    call_command("clear_provider_pause", "claude", stdout=out)
    assert "cleared the pause of provider claude: billing until cleared" in out.getvalue()
    assert not ProviderPause.objects.exists() and pauses.durable_pauses() == {}
