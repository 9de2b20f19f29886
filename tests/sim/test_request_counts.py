"""Requests per X-Request-ID on every real provider server the tests use, and the one exactly-once
assertion built on them (tests/exactly_once.py)."""

from __future__ import annotations

import httpx
import pytest

from batches.models import Batch, BatchItem, ItemStatus
from batches.submission import submit_batch
from tests.engine.provider_server import ProviderServer, Reply
from tests.exactly_once import assert_exactly_once, counts_since
from tests.factories import make_batch, work_item
from tests.faults.server import broken_provider
from tests.sim.helpers import chat


def rid(value: str) -> dict:
    return {"X-Request-ID": value}


def post(url: str, request_id: str | None, content: str = "hi") -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": 4}
    headers = rid(request_id) if request_id is not None else {}
    return httpx.post(url + "/chat/completions", json=body, headers=headers, timeout=30)


# ---- the simulator ---------------------------------------------------------------------------------------
def test_the_simulator_counts_every_answer_per_request_id(sim_server):
    # rpm 1: a bucket of one request that refills once a minute, so the second request is a 429
    sim = sim_server({"providers": {"a": {"rpm": 1, "median_ms": 0}, "b": {"api_key": "k", "median_ms": 0}}})
    assert chat(sim, "a", headers=rid("x1")).status_code == 200
    assert chat(sim, "a", headers=rid("x1")).status_code == 429
    assert chat(sim, "a", headers={**rid("x2"), "x-sim-force-status": "503"}).status_code == 503
    assert chat(sim, "a").status_code == 429  # no header: key ""
    bad = httpx.post(sim.provider_url("a") + "/chat/completions", content=b"{", headers=rid("x3"))
    assert bad.status_code == 400
    assert chat(sim, "b", headers=rid("x1")).status_code == 401
    assert httpx.get(sim.provider_url("a") + "/models").status_code == 200  # not a chat request

    assert sim.request_counts() == {"a": {"x1": 2, "x2": 1, "": 1, "x3": 1}, "b": {"x1": 1}}
    raw = httpx.get(f"{sim.base_url}/_sim/requests").json()
    assert raw == {"providers": {"a": {"x1": 2, "x2": 1, "": 1, "x3": 1}, "b": {"x1": 1}}}
    counters = sim.counters()["providers"]
    assert counters["a"]["requests"] == 5 and counters["b"]["requests"] == 1  # the same requests
    assert "by_request_id" not in counters["a"]  # /_sim/counters stays small

    sim.reset()
    assert sim.request_counts() == {"a": {}, "b": {}}
    chat(sim, "a", headers=rid("x9"))
    sim.set_config({"providers": {"c": {}}})
    assert sim.request_counts() == {"c": {}}


def test_the_simulator_counts_outage_and_scripted_answers(sim_server):
    sim = sim_server(
        {
            "providers": {
                "down": {"outage": {"period_s": 3600, "duration_s": 3600}},
                "script": {"status_script": [500, 429], "median_ms": 0},
            }
        }
    )
    assert chat(sim, "down", headers=rid("o")).status_code == 503
    assert [chat(sim, "script", headers=rid("s")).status_code for _ in range(3)] == [500, 429, 200]
    assert sim.request_counts() == {"down": {"o": 1}, "script": {"s": 3}}


# ---- the other real servers ------------------------------------------------------------------------------
def test_the_engine_provider_server_counts_per_request_id():
    server = ProviderServer().start()
    try:
        server.behaviours["bad"] = lambda n, r, a, b: Reply(429, headers={"Retry-After": "1"})
        assert post(server.url("good"), "g1").status_code == 200
        assert post(server.url("good"), "g1").status_code == 200
        assert post(server.url("bad"), "g1").status_code == 429
        assert post(server.url("bad"), None).status_code == 429
        expected = {"good": {"g1": 2}, "bad": {"g1": 1, "": 1}}
        assert server.request_counts() == expected
        raw = httpx.get(f"http://127.0.0.1:{server.port}/_sim/requests").json()
        assert raw == {"providers": expected}
        assert server.count() == 4 and len(server.hits_for("g1")) == 3  # the old API still answers
    finally:
        server.stop()


def test_the_broken_provider_counts_per_mode_and_request_id():
    with broken_provider() as broken:
        assert post(broken.url("ok"), "b1").status_code == 200
        assert post(broken.url("html"), "b1").status_code == 200
        assert post(broken.url("reset_429"), "b2").status_code == 429
        assert post(broken.url("reset_429"), "b2").status_code == 429
        assert post(broken.url("odd_headers"), None).status_code == 503
        assert post(broken.url("nope"), "b3").status_code == 404
        expected = {"ok": {"b1": 1}, "html": {"b1": 1}, "reset_429": {"b2": 2}, "odd_headers": {"": 1},
                    "nope": {"b3": 1}}  # fmt: skip
        assert broken.request_counts() == expected
        assert broken.counts()["by_request"] == {"b1": 2, "b2": 2, "": 1, "b3": 1}  # the old shape stays
        since = counts_since(broken)
        assert post(broken.url("ok"), "b1").status_code == 200
        assert since.request_counts() == {"ok": {"b1": 1}}
        broken.reset()
        assert broken.request_counts() == {} and broken.counts() == {"by_mode": {}, "by_request": {}}


# ---- assert_exactly_once on rows built by hand -----------------------------------------------------------
class Counts:
    """A stand-in server: fixed request counts."""

    def __init__(self, counts: dict):
        self.counts = counts

    def request_counts(self) -> dict:
        return self.counts


def stats(**request_counts: int) -> dict:
    return {"providers": {p: {"request_count": n} for p, n in request_counts.items()}}


def batch_with(team, attempts: dict[str, int], **request_counts: int) -> Batch:
    batch = make_batch(
        team, [work_item(cid, provider="alpha") for cid in attempts], stats=stats(**request_counts)
    )
    for cid, n in attempts.items():
        BatchItem.objects.filter(batch=batch, custom_id=cid).update(attempts=n)
    return batch


@pytest.mark.django_db
def test_consistent_counts_pass_and_summarise(team):
    # e1: one request; e2: one at alpha, then a fallback to beta; e3: never sent (attempts 0)
    batch = batch_with(team, {"e1": 1, "e2": 2, "e3": 0}, alpha=2, beta=1)
    other = batch_with(team, {"z1": 1}, alpha=1)
    seen = Counts({"alpha": {"e1": 1, "e2": 1, "z1": 1, "": 4}, "beta": {"e2": 1}})
    summary = assert_exactly_once([batch.id], [seen])
    assert summary == {"batches": 1, "items": 3, "items_sent": 2, "requests": 3, "duplicates": 1,
                       "by_provider": {"alpha": 2, "beta": 1}, "other_requests": 5, "unseen": 0}  # fmt: skip
    # several batches and servers: summed (Batch objects or ids)
    split = [Counts({"alpha": {"e1": 1, "e2": 1}}), Counts({"alpha": {"z1": 1}, "beta": {"e2": 1}})]
    assert assert_exactly_once([batch, str(other.id)], split)["requests"] == 4
    with pytest.raises(AssertionError, match=r"strict: 5 request\(s\) with ids of no given batch"):
        assert_exactly_once([batch.id], [seen], strict=True)


@pytest.mark.django_db
def test_a_duplicate_request_fails_and_is_named(team):
    batch = batch_with(team, {"d1": 1, "d2": 1}, alpha=2)
    seen = Counts({"alpha": {"d1": 2, "d2": 1}})  # d1 sent twice, recorded once
    with pytest.raises(AssertionError) as failure:
        assert_exactly_once([batch.id], [seen])
    message = str(failure.value)
    assert "'d1': seen 2 (alpha 2) vs attempts 1" in message
    assert "'d2'" not in message
    assert "alpha: seen 3 vs request_count 2   <-- differs" in message


@pytest.mark.django_db
def test_a_request_sent_to_another_provider_than_recorded_fails(team):
    # every id seen once, as attempted, but at beta while the stats say alpha
    batch = batch_with(team, {"m1": 1, "m2": 1}, alpha=2)
    seen = Counts({"alpha": {"m1": 1}, "beta": {"m2": 1}})
    with pytest.raises(AssertionError) as failure:
        assert_exactly_once([batch.id], [seen])
    message = str(failure.value)
    assert "custom id" not in message  # (a) holds
    assert "alpha: seen 1 vs request_count 2   <-- differs" in message
    assert "beta: seen 1 vs request_count 0   <-- differs" in message


@pytest.mark.django_db
def test_an_attempt_the_server_never_read_passes_only_where_allowed(team):
    # k1: recorded twice (once "outcome unknown" after a kill), the server read it once; k2: exact
    batch = batch_with(team, {"k1": 2, "k2": 1}, alpha=3)
    seen = Counts({"alpha": {"k1": 1, "k2": 1}})
    with pytest.raises(AssertionError, match=r"'k1': seen 1 \(alpha 1\) vs attempts 2"):
        assert_exactly_once([batch.id], [seen])  # not allowed: fails as before
    assert assert_exactly_once([batch.id], [seen], may_be_unseen={"k1"})["unseen"] == 1
    # allowed for k2 only: k1 still fails; one unseen attempt at most per id, and the totals must add up
    with pytest.raises(AssertionError, match=r"'k1': seen 1"):
        assert_exactly_once([batch.id], [seen], may_be_unseen={"k2"})
    twice = batch_with(team, {"t1": 3}, alpha=3)
    with pytest.raises(AssertionError, match=r"'t1': seen 1 \(alpha 1\) vs attempts 3"):
        assert_exactly_once([twice.id], [Counts({"alpha": {"t1": 1}})], may_be_unseen={"t1"})
    lost = batch_with(team, {"l1": 2}, alpha=3)  # the stats count one attempt more than the items
    with pytest.raises(AssertionError, match=r"alpha: seen 1 vs request_count 3   <-- differs"):
        assert_exactly_once([lost.id], [Counts({"alpha": {"l1": 1}})], may_be_unseen={"l1"})


@pytest.mark.django_db
def test_a_stats_mismatch_fails(team):
    batch = batch_with(team, {"s1": 1, "s2": 3}, alpha=3)  # the stats lost one retry
    seen = Counts({"alpha": {"s1": 1, "s2": 3}})
    with pytest.raises(AssertionError, match=r"alpha: seen 4 vs request_count 3   <-- differs"):
        assert_exactly_once([batch.id], [seen])


@pytest.mark.django_db
def test_a_missing_request_fails_and_the_list_is_cut_at_ten(team):
    attempts = {f"n{i:02d}": 1 for i in range(15)}
    batch = batch_with(team, attempts, alpha=15)
    with pytest.raises(AssertionError) as failure:
        assert_exactly_once([batch.id], [Counts({})])
    message = str(failure.value)
    assert "15 custom id(s) where the providers' requests != the items' attempts (first 10)" in message
    assert "'n09': seen 0 vs attempts 1" in message and "'n10'" not in message
    assert "alpha: seen 0 vs request_count 15" in message


@pytest.mark.django_db
def test_an_unknown_batch_fails(team):
    batch = batch_with(team, {"u1": 0})
    assert assert_exactly_once([batch.id], [])["requests"] == 0
    with pytest.raises(AssertionError, match="no such batch"):
        assert_exactly_once([batch.id, "00000000-0000-0000-0000-000000000000"], [])


# ---- end to end: the engine against the simulator ----------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_a_real_batch_with_retries_passes_and_one_more_request_fails(
    sim_server, make_provider, team, redis_sync, django_capture_on_commit_callbacks
):
    sim = sim_server({"providers": {"eo": {"status_script": [500, 500, 503], "median_ms": 1}}})
    make_provider("eo", base_url=sim.provider_url("eo"), rpm=6000, burst_seconds=1, max_retries=4)
    rows = [{"custom_id": f"r{i:02d}", "provider": "eo", "query": f"q{i}", "params": {"max_tokens": 4}}
            for i in range(12)]  # fmt: skip
    with django_capture_on_commit_callbacks(execute=True):
        batch = submit_batch(team=team, items=rows)
    assert BatchItem.objects.filter(batch=batch, status=ItemStatus.SUCCEEDED).count() == 12
    summary = assert_exactly_once([batch.id], [sim], strict=True)
    assert (summary["items_sent"], summary["requests"], summary["duplicates"]) == (12, 15, 3)
    chat(sim, "eo", headers=rid("r03"))  # one request the gateway did not record
    with pytest.raises(AssertionError, match=r"'r03': seen \d+ \(eo \d+\) vs attempts"):
        assert_exactly_once([batch.id], [sim])
