"""Params and content checked against every provider an item can reach (batches.submission.reach, #21):
pure, no database — the routing table and the providers' stored flags are built here, and the real
wire formats (gateway_engine.wire: openai, azure_openai, anthropic, gemini) judge the items."""

from __future__ import annotations

import pytest

from batches.submission.caps import Limits
from batches.submission.errors import SubmissionError
from batches.submission.reach import Reach, _named
from batches.submission.targets import KnownTargets
from batches.submission.validation import check_items
from gateway_engine.quota.types import ProviderLimits
from gateway_engine.routing import ProviderConfig, RouteRule, routing_table
from gateway_engine.wire import ParamProblem

LIMITS = Limits(max_items=20_000, max_body_bytes=10**8, max_item_bytes=10_000)


def config(name: str, kind: str = "openai") -> ProviderConfig:
    limits = ProviderLimits(
        name=name, rpm=60, tpm=100_000, burst_seconds=1, max_concurrency=1, timeout_seconds=5
    )
    api_version = "2024-10-21" if kind == "azure_openai" else ""
    return ProviderConfig(
        name=name, base_url="http://x", model="m", limits=limits, kind=kind, api_version=api_version
    )


def targets(providers, rules, enabled=None) -> KnownTargets:
    table = routing_table(providers, rules)
    flags = enabled or {p.name: True for p in providers}
    reach = Reach.of(table, flags)
    return KnownTargets(routes=frozenset(reach.routes), providers=flags, reach=reach)


# gpt (openai) first, claude (anthropic) the fallback of route "mixed"; "plain" reaches gpt only
MIXED = targets(
    [config("gpt"), config("claude", "anthropic"), config("gem", "gemini"), config("az", "azure_openai")],
    [
        RouteRule("mixed", "gpt"),
        RouteRule("mixed", "claude", priority=1),
        RouteRule("plain", "gpt"),
        RouteRule("plain", "az", priority=1),
    ],
)


def item(cid: str, params=None, *, route: str = "", provider: str = "", content="hi") -> dict:
    out = {"custom_id": cid, "messages": [{"role": "user", "content": content}], "params": params or {}}
    out["route" if route else "provider"] = route or provider
    return out


def problems(items, known=MIXED):
    with pytest.raises(SubmissionError) as caught:
        check_items(items, known, LIMITS)
    return [(e.index, e.field, e.message) for e in caught.value.errors], caught.value.error_count


def test_a_value_one_reachable_provider_cannot_take_is_refused_naming_field_and_provider():
    found, count = problems(
        [
            item("ok", {"temperature": 0.5}, route="mixed"),
            item("hot", {"temperature": 1.5}, route="mixed"),  # gpt takes 1.5; claude (fallback) does not
            item("fine-elsewhere", {"temperature": 1.5}, route="plain"),
        ]
    )
    assert found == [(1, "params.temperature", "1.5 is above 1 for provider 'claude' (kind anthropic)")]
    assert count == 1


def test_an_explicit_provider_is_checked_and_openai_kinds_take_what_they_take():
    found, _ = problems(
        [
            item("g", {"top_k": 3, "temperature": 0.2}, provider="gem"),
            item("o", {"top_k": 3, "logit_bias": {"1": 2}}, provider="gpt"),
            item("a", {"top_k": 3}, provider="az"),
        ]
    )
    assert found == [(0, "params.top_k", "not taken by provider 'gem' (kind gemini)")]


def test_content_a_reachable_kind_cannot_carry_is_refused_on_its_message_field():
    audio = [{"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}]
    found, _ = problems(
        [item("voice", route="mixed", content=audio), item("plain", route="plain", content=audio)]
    )
    assert [(i, f) for i, f, _ in found] == [(0, "messages[0].content[0]")]
    assert "provider 'claude' (kind anthropic)" in found[0][2]


def test_every_refusing_provider_is_named_once_however_many_rules_reach_it():
    known = targets(
        [config("claude", "anthropic"), config("claude2", "anthropic")],
        [
            RouteRule("r", "claude"),
            RouteRule("r", "claude2", priority=1),
            RouteRule("r", "claude", priority=2),
        ],
    )
    found, count = problems([item("x", {"temperature": 2}, route="r")], known)
    assert [m for _, _, m in found] == [
        "2 is above 1 for provider 'claude' (kind anthropic)",
        "2 is above 1 for provider 'claude2' (kind anthropic)",
    ]
    assert count == 2


def test_disabled_providers_and_rules_are_not_reachable_so_not_checked():
    known = targets(
        [config("gpt"), config("claude", "anthropic"), config("gem", "gemini")],
        [RouteRule("r", "gpt"), RouteRule("r", "claude", priority=1), RouteRule("r", "gem", enabled=False)],
        enabled={"gpt": True, "claude": False, "gem": True},
    )
    assert [
        v.custom_id
        for v in check_items([item("x", {"temperature": 2, "top_k": 1}, route="r")], known, LIMITS)
    ] == ["x"]


def test_a_provider_of_an_unknown_kind_is_a_configuration_error_on_the_items_target_not_a_crash():
    known = targets(
        [config("gpt"), config("odd", "carrier-pigeon")],
        [RouteRule("r", "gpt"), RouteRule("r", "odd", priority=1)],
    )
    found, _ = problems([item("a", route="r"), item("b", provider="odd"), item("c", provider="gpt")], known)
    assert [(i, f) for i, f, _ in found] == [(0, "route"), (1, "provider")]
    message = found[0][2]
    assert "'odd'" in message and "'carrier-pigeon'" in message and "configuration error" in message
    assert "anthropic" in message  # the known kinds are listed


def test_a_wire_message_that_does_not_name_its_provider_gets_the_provider_added():
    claude = config("claude", "anthropic")
    assert _named(ParamProblem("params.x", "is odd"), claude) == (
        "params.x",
        "is odd (provider 'claude', kind anthropic)",
    )
    named = ParamProblem("params.x", "is odd for provider 'claude' (kind anthropic)")
    assert _named(named, claude) == ("params.x", named.message)


def test_an_item_with_problems_of_its_own_is_not_also_judged_per_provider():
    found, _ = problems([item("x", {"temperature": 2, "max_tokens": 0}, route="mixed")])
    assert found == [(0, "params.max_tokens", "must be a positive integer")]


def test_ten_thousand_items_are_judged_from_the_one_table_with_every_problem_counted():
    items = [
        item(f"i{n}", {"temperature": 1.5 if n % 10 == 0 else 0.3}, route="mixed") for n in range(10_000)
    ]
    found, count = problems(items)
    assert count == 1000 and len(found) == 100  # listed: the first MAX_ERRORS
    assert {f for _, f, _ in found} == {"params.temperature"}
