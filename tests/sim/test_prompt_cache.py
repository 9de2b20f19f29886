"""The simulator's prompt caches (sim/prompt_cache.py): each kind's documented rule through the real HTTP
server, and the LRU / TTL that make interleaving prefixes lose them."""

from __future__ import annotations

import pytest

from sim.config import ConfigError, load_config
from sim.prompt_cache import PromptCache, PromptCacheConfig, common_prefix
from tests.sim.helpers import HTTP, anthropic_post, azure_body, azure_post, gemini_body, gemini_post

SYSTEM = "s" * 8000  # 2,000 tokens (ceil(chars / 4))
FAST = {"median_ms": 0, "completion_tokens": 2}


def openai_post(sim, name, system, user):
    body = {"model": "m", "max_tokens": 4,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}  # fmt: skip
    return HTTP.post(sim.provider_url(name) + "/chat/completions", json=body).json()["usage"]


def test_openai_caches_automatically_past_1024_tokens_in_128_token_increments(sim_server):
    sim = sim_server({"providers": {"o": FAST, "a": {"kind": "azure_openai", "model": "d", **FAST}}})
    first = openai_post(sim, "o", SYSTEM, "question one")
    assert "prompt_tokens_details" not in first  # nothing cached yet
    second = openai_post(sim, "o", SYSTEM, "question two")
    # common prefix = 8000 chars of system + "question " (9) -> 2003 tokens -> 1024 + 7 x 128 = 1920
    assert second["prompt_tokens_details"] == {"cached_tokens": 1920}
    assert second["prompt_tokens"] == first["prompt_tokens"]
    short = "t" * 4000  # 1,000 tokens: under the minimum, never cached
    openai_post(sim, "o", short, "q1")
    assert "prompt_tokens_details" not in openai_post(sim, "o", short, "q2")
    for _ in range(2):  # azure: the same rule, the same field
        u = azure_post(sim, "a", "d", azure_body(SYSTEM + "q")).json()["usage"]
    assert u["prompt_tokens_details"] == {"cached_tokens": 1920}  # 2001 tokens -> 1920
    c = sim.provider_counters("o")
    assert (c["prompt_cache_hits"], c["prompt_cache_misses"], c["cached_prompt_tokens"]) == (1, 3, 1920)


def claude(system_blocks, user="q", **extra):
    return {"model": "claude-sim", "max_tokens": 4, "system": system_blocks,
            "messages": [{"role": "user", "content": user}], **extra}  # fmt: skip


def test_anthropic_caches_only_at_cache_control_breakpoints(sim_server):
    sim = sim_server({"providers": {"c": {"kind": "anthropic", **FAST}}})
    plain = [{"type": "text", "text": SYSTEM}]
    for _ in range(2):
        u = anthropic_post(sim, "c", claude(plain)).json()["usage"]
    assert (u["cache_read_input_tokens"], u["cache_creation_input_tokens"]) == (0, 0)  # no marker, no cache
    marked = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    first = anthropic_post(sim, "c", claude(marked, "first")).json()["usage"]
    assert first == {"input_tokens": 2, "output_tokens": 2, "cache_creation_input_tokens": 2000,
                     "cache_read_input_tokens": 0}  # fmt: skip
    second = anthropic_post(sim, "c", claude(marked, "second")).json()["usage"]
    assert second == {"input_tokens": 2, "output_tokens": 2, "cache_creation_input_tokens": 0,
                      "cache_read_input_tokens": 2000}  # fmt: skip
    small = [{"type": "text", "text": "x" * 400, "cache_control": {"type": "ephemeral"}}]  # 100 < 1024
    for _ in range(2):
        u = anthropic_post(sim, "c", claude(small)).json()["usage"]
    assert (u["cache_read_input_tokens"], u["cache_creation_input_tokens"]) == (0, 0)
    c = sim.provider_counters("c")
    assert (c["cached_prompt_tokens"], c["cache_write_tokens"]) == (2000, 2000)


def test_anthropic_refuses_bad_cache_control_and_more_than_four_breakpoints(sim_server):
    sim = sim_server({"providers": {"c": {"kind": "anthropic", **FAST}}})
    bad = [{"type": "text", "text": "x", "cache_control": {"type": "persistent"}}]
    r = anthropic_post(sim, "c", claude(bad))
    assert r.status_code == 400 and "system.0.text.cache_control.type" in r.json()["error"]["message"]
    five = [{"type": "text", "text": f"x{i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    r = anthropic_post(sim, "c", claude(five))
    assert r.status_code == 400 and "A maximum of 4 blocks with cache_control" in r.json()["error"]["message"]
    assert sim.provider_counters("c")["shape_rejections"] == 2


def test_gemini_reports_implicit_cache_hits_token_exact(sim_server):
    sim = sim_server({"providers": {"g": {"kind": "gemini", "model": "g", **FAST}}})
    body = gemini_body("q1", system_instruction={"parts": [{"text": SYSTEM}]})
    assert "cachedContentTokenCount" not in gemini_post(sim, "g", "g", body).json()["usageMetadata"]
    body = gemini_body("q2", system_instruction={"parts": [{"text": SYSTEM}]})
    meta = gemini_post(sim, "g", "g", body).json()["usageMetadata"]
    assert meta["cachedContentTokenCount"] == 2001 and meta["promptTokenCount"] == 2001  # 8001 chars common


def test_interleaving_more_prefixes_than_the_lru_holds_evicts_them(sim_server):
    sim = sim_server({"providers": {"o": {**FAST, "prompt_cache_entries": 3}}})
    systems = [chr(ord("a") + i) * 8000 for i in range(5)]
    for round_ in range(2):
        for s in systems:  # 5 prefixes round-robin through 3 entries: every one is gone by its reuse
            openai_post(sim, "o", s, f"q{round_}")
    assert sim.provider_counters("o")["prompt_cache_hits"] == 0
    for s in systems[:3]:
        openai_post(sim, "o", s, "grouped")
        openai_post(sim, "o", s, "grouped again")
    c = sim.provider_counters("o")
    assert c["prompt_cache_hits"] == 3 and c["prompt_cache_evictions"] > 0
    sim.reset()
    assert sim.provider_counters("o")["cached_prompt_tokens"] == 0


def test_entries_expire_after_the_scaled_ttl_and_are_readable_only_once_stored():
    cache = PromptCache("openai", PromptCacheConfig(entries=4, ttl_ms=1000), time_scale=10)  # 0.1 real s
    texts = [SYSTEM, "q"]
    first = cache.lookup(texts, [], now=0.0)
    assert first.read == 0 and cache.lookup(texts, [], now=0.0).read == 0  # not stored before it answers
    cache.put(first, now=0.0)
    assert cache.lookup(texts, [], now=0.05).read == 1920  # 2001 tokens common: 1024 + 7 x 128
    assert cache.lookup(texts, [], now=0.2).read == 0  # expired
    assert common_prefix("abcdef", "abcxyz") == 3 and common_prefix("", "a") == 0


def test_prompt_cache_options_are_checked():
    cfg = load_config({"providers": {"p": {"prompt_cache_entries": 0}}})
    assert cfg.providers["p"].prompt_cache.entries == 0
    with pytest.raises(ConfigError, match="providers.p.prompt_cache_entries: must be >= 0"):
        load_config({"providers": {"p": {"prompt_cache_entries": -1}}})
    with pytest.raises(ConfigError, match="providers.p.cache_read_ratio: give cache_read_ratio"):
        load_config({"providers": {"p": {"prompt_cache_entries": 2, "cache_read_ratio": 0.5}}})
