"""The response cache's rules without workers: keys (canonical JSON, excluded params, team scope), the
policy, TTL, the size bound, purge, clear (command and admin action), leaders, the batch field at
submission (docs/cache.md)."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from batches.submission import SubmissionError, batch_options, submit_body
from observability.retention import purge_old_data
from response_cache import keys, policy, selectors, services
from response_cache.models import CacheEntry, InFlight

MSG = [{"role": "user", "content": "hi"}]


def key(**kw):
    args = dict(team="1", provider="p", model="m", messages=MSG, params={"temperature": 0, "max_tokens": 5})
    args.update(kw)
    return keys.cache_key(**args)


# ---- keys and policy (pure) ----


def test_the_key_is_canonical_json_whatever_the_order_of_keys():
    a = key(params={"temperature": 0, "max_tokens": 5, "stop": {"a": 1, "b": 2}})
    b = key(params={"stop": {"b": 2, "a": 1}, "max_tokens": 5, "temperature": 0})
    assert a == b and len(a) == 64
    assert keys.canonical_json({"b": 1, "a": [1, {"d": 0, "c": 0}]}) == '{"a":[1,{"c":0,"d":0}],"b":1}'


def test_a_query_is_the_same_key_as_its_user_message():
    assert keys.expand_messages(None, "hi") == MSG
    assert key(messages=keys.expand_messages(None, "hi")) == key()


@pytest.mark.parametrize("param", ["user", "metadata", "stream", "stream_options"])
def test_excluded_params_do_not_change_the_key(param):
    assert key(params={"temperature": 0, "max_tokens": 5, param: "x"}) == key()


@pytest.mark.parametrize(
    "change",
    [
        {"team": "2"},
        {"provider": "q"},
        {"model": "m2"},
        {"messages": [{"role": "user", "content": "hi!"}]},
        {"params": {"temperature": 0, "max_tokens": 6}},
        {"params": {"temperature": 0, "max_tokens": 5, "seed": 1}},
    ],
)
def test_team_provider_model_messages_and_other_params_change_the_key(change):
    assert key(**change) != key()


def test_teams_share_a_key_only_when_the_setting_says_so():
    assert keys.team_part(7, shared=False) == "7"
    assert keys.team_part(7, shared=True) == keys.team_part(8, shared=True) == ""


def test_dedup_key_ignores_the_provider_but_not_the_target():
    base = dict(team="1", messages=MSG, params={"temperature": 0})
    assert keys.dedup_key(target="route:a", **base) == keys.dedup_key(target="route:a", **base)
    assert keys.dedup_key(target="route:a", **base) != keys.dedup_key(target="route:b", **base)


@pytest.mark.parametrize(
    "batch_cache, route_cache, params, expected",
    [
        (True, False, {"temperature": 1.2}, True),  # the batch asks: any temperature
        (True, False, {}, True),
        (False, True, {"temperature": 0}, False),  # the batch refuses: the route does not matter
        (None, True, {"temperature": 0}, True),
        (None, True, {"temperature": 0.0}, True),
        (None, True, {"temperature": 0.3}, False),
        (None, True, {}, False),  # missing counts as above 0
        (None, True, {"temperature": False}, False),
        (None, False, {"temperature": 0}, False),
    ],
)
def test_policy_precedence_and_temperature_rule(batch_cache, route_cache, params, expected):
    assert policy.applies(batch_cache, route_cache, params) is expected


# ---- storage ----


def entry(k: str, team_id, size: int = 10) -> services.NewEntry:
    return services.NewEntry(k, team_id, "p", {"response": {"x": "a" * size}, "total_tokens": 3})


def test_an_entry_is_served_until_its_ttl(team, settings):
    settings.GATEWAY_CACHE_TTL_SECONDS = 60
    now = timezone.now()
    services.store([entry("k1", team.id)], now=now - dt.timedelta(seconds=59))
    services.store([entry("k2", team.id)], now=now - dt.timedelta(seconds=61))
    assert set(selectors.live_entries(["k1", "k2"])) == {"k1"}
    assert selectors.live_entries(["k1"])["k1"].answer["total_tokens"] == 3


def test_the_oldest_entries_are_evicted_past_the_size_bound(team, settings):
    now = timezone.now()
    for i in range(10):
        services.store([entry(f"e{i}", team.id, size=100)], now=now + dt.timedelta(seconds=i))
    one = CacheEntry.objects.get(key="e0").bytes
    settings.GATEWAY_CACHE_MAX_BYTES = one * 4
    services.store([entry("e10", team.id, size=100)], now=now + dt.timedelta(seconds=10))
    assert sorted(CacheEntry.objects.values_list("key", flat=True)) == ["e10", "e7", "e8", "e9"]
    assert selectors.stored_bytes() <= one * 4


def test_purge_deletes_expired_entries_and_dead_leaders_and_clear_a_teams(team, other_team):
    now = timezone.now()
    services.store([entry("old", team.id)], now=now - dt.timedelta(days=3))
    services.store([entry("mine", team.id), entry("theirs", other_team.id)])
    assert services.lead(["gone"], "dead", -1.0) == {"gone"}
    report = purge_old_data(0)
    assert report.purged["cache_entries"] == 2  # the expired entry and the dead leader
    assert set(CacheEntry.objects.values_list("key", flat=True)) == {"mine", "theirs"}
    assert not InFlight.objects.exists()
    out = io.StringIO()
    call_command("clear_cache", "--team", team.name, stdout=out)
    assert "cleared 1 cache entries" in out.getvalue()
    assert set(CacheEntry.objects.values_list("key", flat=True)) == {"theirs"}
    with pytest.raises(CommandError, match="--team"):
        call_command("clear_cache", "--team", "nobody")


def test_retention_cutoff_deletes_entries_stored_before_it(team):
    services.store([entry("k", team.id)], now=timezone.now() - dt.timedelta(hours=20))
    assert purge_old_data(None).purged.get("cache_entries") is None  # nothing expired, retention off
    assert purge_old_data(1, now=timezone.now() + dt.timedelta(hours=5)).purged["cache_entries"] == 1


def test_the_admin_action_clears_the_selected_entries_teams(client, team, other_team):
    from tests.factories import login_superuser

    services.store([entry("a1", team.id), entry("a2", team.id), entry("b1", other_team.id)])
    login_superuser(client)
    pk = CacheEntry.objects.get(key="a1").pk
    response = client.post(
        "/admin/response_cache/cacheentry/", {"action": "clear_teams_cache", "_selected_action": [pk]}
    )
    assert response.status_code == 302
    assert list(CacheEntry.objects.values_list("key", flat=True)) == ["b1"]


def test_a_key_has_one_leader_until_it_is_released_or_its_lease_ends(db):
    assert services.lead(["k"], "a", 60) == {"k"}
    assert services.lead(["k"], "b", 60) == set()
    assert services.lead(["k"], "a", 60) == {"k"}  # the same owner keeps it
    assert services.release(["k"], "b") == 0
    assert services.release(["k"], "a") == 1
    assert services.lead(["k"], "b", 60) == {"k"}
    assert services.renew("b", 60) == 1


# ---- the batch field ----


@pytest.mark.parametrize(
    "value, expected", [(None, None), (True, True), (False, False), ("true", True), ("0", False)]
)
def test_batch_options_take_cache(value, expected):
    assert batch_options(cache=value).cache is expected


@pytest.mark.parametrize("value", ["maybe", 2, [], {}])
def test_a_bad_cache_value_is_refused_naming_the_field(value):
    with pytest.raises(SubmissionError) as exc:
        batch_options(cache=value)
    assert [e.field for e in exc.value.errors] == ["cache"]


def test_submission_stores_cache_from_the_json_body_and_the_jsonl_query(team, make_provider):
    make_provider("alpha")
    item = b'{"custom_id": "a", "provider": "alpha", "query": "hi"}'
    batch = submit_body(
        team=team, body=b'{"items": [' + item + b'], "cache": true}', content_type="application/json"
    )
    assert batch.cache is True
    batch = submit_body(team=team, body=item, content_type="application/jsonl", query={"cache": "false"})
    assert batch.cache is False
    batch = submit_body(team=team, body=item, content_type="application/jsonl")
    assert batch.cache is None


# ---- the route's setting in the provider file ----


def test_the_provider_file_sets_a_routes_cache_and_refuses_a_non_boolean(db):
    from providers.models import RoutingRule
    from providers.services import ProviderConfigError, load_provider_config

    provider = {
        "name": "pf",
        "base_url": "http://127.0.0.1:9/pf/v1",
        "model": "m",
        "rpm": 60,
        "tpm": 1000,
        "max_concurrency": 2,
    }
    load_provider_config(
        {"providers": [provider], "routes": [{"route": "r", "provider": "pf", "cache": True}]}
    )
    assert RoutingRule.objects.get(route="r").cache is True
    load_provider_config({"providers": [provider], "routes": [{"route": "r", "provider": "pf"}]})
    assert RoutingRule.objects.get(route="r").cache is False  # omitted: the default, off
    with pytest.raises(ProviderConfigError, match="cache"):
        load_provider_config(
            {"providers": [provider], "routes": [{"route": "r", "provider": "pf", "cache": "yes"}]}
        )
