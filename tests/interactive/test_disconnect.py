"""A client that disconnects during a plain (non-streamed) ``/v1/chat/completions`` call cancels it, as a
streamed one does: the gateway closes its upstream connection (the simulator sees its client leave),
the provider lease and the budget reservation go back in Redis at once, and the call is logged
``failed`` / ``cancelled``. Real uvicorn + gateway_site.asgi, the simulator holding the answer, a raw
socket that the client closes."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import pytest

from providers.adapters import provider_limits
from providers.limits import snapshot_all_sync
from providers.limits.budgets import budget_usage
from providers.limits.factory import run_with_store
from teams.services import create_api_key
from tests.waiting import wait_until

from .conftest import logged_calls, settled
from .test_sdk import KINDS

pytestmark = pytest.mark.django_db(transaction=True)


def leases(provider) -> int:
    return snapshot_all_sync([provider_limits(provider)])[0].leases_in_flight


def used_today(team) -> int:
    return {period: spent for period, _, spent in budget_usage(team)}["day"]


def open_call(base_url: str, key: str, body: dict) -> socket.socket:
    """A POST /v1/chat/completions sent whole on a raw socket (its answer never read)."""
    url = urlsplit(base_url)
    data = json.dumps(body).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n")  # fmt: skip
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    sock.sendall(head.encode() + data)
    return sock


def test_a_client_that_leaves_a_plain_call_cancels_it_and_frees_the_lease_and_the_reservation(
    sim_server, make_provider, make_route, team, gateway
):
    # the simulator holds every answer for a minute (real seconds): only a cancel ends the call sooner
    sim = sim_server({"time_scale": 1, "providers": {"gpt": {**KINDS["gpt"], "hang_rate": 1.0,
                                                             "hang_seconds": 60}}})  # fmt: skip
    gpt = make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=6000, tpm=10**6,
                        timeout_seconds=120)  # fmt: skip
    make_route("chat", gpt)
    team.daily_token_budget = 100_000
    team.save()
    key = create_api_key(team, "k")[1]
    settled()
    body = {"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 40}
    sock = open_call(gateway, key, body)
    try:
        wait_until(lambda: sim.counters()["providers"]["gpt"]["in_flight"] == 1, 15,
                   what="the simulator to hold the call")  # fmt: skip
        assert leases(gpt) == 1
        assert used_today(team) == 1 + 40  # reserved: prompt estimate + max_tokens
    finally:
        sock.close()  # the client leaves without reading the answer
    wait_until(lambda: sim.counters()["providers"]["gpt"]["disconnects"] == 1, 15,
               what="the simulator to see the gateway close the upstream connection")  # fmt: skip
    wait_until(lambda: leases(gpt) == 0, 10, what="the lease back in Redis")
    assert used_today(team) == 0  # the reservation given back: nobody reported usage
    counters = sim.counters()["providers"]["gpt"]
    assert (counters["in_flight"], counters["hangs"]) == (0, 1)
    (row,) = logged_calls(1)
    assert (row.status, row.error_type, row.stream, row.http_status) == ("failed", "cancelled", False, 499)


def test_a_client_that_leaves_while_its_call_waits_for_quota_is_never_sent(
    sim_server, make_provider, make_route, team, gateway
):
    sim = sim_server({"time_scale": 1, "providers": {"gpt": KINDS["gpt"]}})
    # rpm 60 with a 1 s burst: the first call takes the only token, the second waits about a second
    gpt = make_provider("gpt", base_url=sim.provider_url("gpt"), model="gpt-sim", rpm=60, burst_seconds=1.0,
                        tpm=10**6)  # fmt: skip
    make_route("chat", gpt)
    key = create_api_key(team, "k")[1]
    settled()
    body = {"model": "chat", "messages": [{"role": "user", "content": "x"}], "max_tokens": 5}
    first = open_call(gateway, key, body)
    wait_until(lambda: sum(sim.request_counts().get("gpt", {}).values()) == 1, 15, what="the first call sent")
    waiting = open_call(gateway, key, body)
    wait_until(lambda: run_with_store(lambda store: store.interactive_waiters("gpt")) >= 1, 15,
               what="the second call to wait for quota")  # fmt: skip
    waiting.close()  # gone while it waits for the refill
    first.close()
    rows = logged_calls(2)
    assert [r.status for r in rows].count("succeeded") == 1
    (gone,) = [r for r in rows if r.status != "succeeded"]
    assert (gone.status, gone.error_type, gone.http_status, gone.attempts) == ("failed", "cancelled", 499, 0)
    # well past the refill: the provider still saw one call (a cancelled waiter never takes a token)
    wait_until(
        lambda: snapshot_all_sync([provider_limits(gpt)])[0].rpm_tokens_available >= 1, 10, what="the refill"
    )
    assert sum(sim.request_counts()["gpt"].values()) == 1
    assert leases(gpt) == 0
