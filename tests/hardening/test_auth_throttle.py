"""Failed API-key checks are throttled per client IP (#29), before the key lookup.

Pre-fix: 700 bad-key requests → 700 × 401, each one a database lookup, and the per-key DRF throttle
never saw them (it counts only authenticated requests).
"""

from __future__ import annotations

import itertools
import uuid
from collections import Counter

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

LIMIT = 5
_addresses = itertools.count(1)


def fresh_ip() -> str:
    """An address no other test of this run has used (the counters live in this run's Redis prefix)."""
    n = next(_addresses)
    return f"198.51.{100 + n // 250}.{n % 250 + 1}"


def bad_key() -> str:
    return "bgw_" + uuid.uuid4().hex + uuid.uuid4().hex[:11]


def client_at(ip: str, key: str, **extra) -> APIClient:
    c = APIClient(REMOTE_ADDR=ip, **extra)
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return c


def key_lookups(queries) -> int:
    return sum(1 for q in queries if "batches_apikey" in q["sql"])


NOW = 1_800_000_000.0 + 10  # 10 s into a 60 s window: a test never straddles two windows


@pytest.fixture
def limit(settings, monkeypatch):
    import gateway_site.security

    settings.GATEWAY_AUTH_FAILURE_LIMIT = LIMIT
    settings.GATEWAY_AUTH_FAILURE_WINDOW_SECONDS = 60
    monkeypatch.setattr(gateway_site.security, "clock", lambda: NOW)
    return LIMIT


@pytest.mark.parametrize(
    "path, shape",
    [("/api/v1/batches", "api"), ("/v1/files", "openai")],
)
def test_failed_key_flood_gets_429_without_key_lookups_while_another_address_works(
    limit, api_key, path, shape
):
    attacker_ip = fresh_ip()
    attacker = client_at(attacker_ip, bad_key())
    victim = client_at(fresh_ip(), api_key[1])

    codes = [attacker.get(path).status_code for _ in range(limit)]
    assert codes == [401] * limit

    with CaptureQueriesContext(connection) as queries:
        throttled = [attacker.get(path) for _ in range(20)]
    assert {r.status_code for r in throttled} == {429}
    assert key_lookups(queries.captured_queries) == 0, queries.captured_queries
    assert len(queries.captured_queries) == 0  # nothing at all reaches the database
    last = throttled[-1]
    assert int(last["Retry-After"]) == 50  # until the window ends
    body = last.json()
    if shape == "api":
        assert "too many failed API key attempts" in body["detail"]
    else:
        assert body["error"]["type"] == "rate_limit_error"
        assert body["error"]["code"] == "rate_limit_exceeded"
        assert "too many failed API key attempts" in body["error"]["message"]

    # a different bad key from the same address is refused the same way (the address is throttled)
    assert client_at(attacker_ip, bad_key()).get(path).status_code == 429
    # a valid key from another address keeps working throughout
    assert [victim.get(path).status_code for _ in range(5)] == [200] * 5


def test_the_flood_of_700_is_cut_to_the_threshold(limit):
    ip = fresh_ip()
    with CaptureQueriesContext(connection) as queries:
        codes = [client_at(ip, bad_key()).get("/api/v1/batches").status_code for _ in range(700)]
    assert Counter(codes) == {401: limit, 429: 700 - limit}
    assert key_lookups(queries.captured_queries) == limit


def test_malformed_and_revoked_credentials_count_missing_ones_do_not(limit, api_key):
    from teams.services import create_api_key, revoke_api_key

    key, _ = api_key
    revoked_key, revoked_raw = create_api_key(key.team, "old")
    revoke_api_key(revoked_key)
    ip = fresh_ip()
    anonymous = APIClient(REMOTE_ADDR=ip)
    assert [anonymous.get("/api/v1/batches").status_code for _ in range(limit + 3)] == [401] * (limit + 3)
    for header in ("Token abc", "Bearer a b", "Bearer not-a-gateway-key", f"Bearer {revoked_raw}"):
        c = APIClient(REMOTE_ADDR=ip)
        c.credentials(HTTP_AUTHORIZATION=header)
        assert c.get("/api/v1/batches").status_code == 401
    assert client_at(ip, bad_key()).get("/api/v1/batches").status_code == 401  # the 5th failure
    assert client_at(ip, bad_key()).get("/api/v1/batches").status_code == 429


def test_a_throttled_address_is_refused_even_with_a_valid_key(limit, api_key):
    """The check runs before the lookup, so it cannot tell a good key from a bad one: the address waits."""
    ip = fresh_ip()
    for _ in range(limit):
        client_at(ip, bad_key()).get("/api/v1/batches")
    assert client_at(ip, api_key[1]).get("/api/v1/batches").status_code == 429


def test_the_address_may_try_again_when_its_window_ends(limit, monkeypatch):
    import gateway_site.security

    ip = fresh_ip()
    for _ in range(limit + 1):
        client_at(ip, bad_key()).get("/api/v1/batches")
    assert client_at(ip, bad_key()).get("/api/v1/batches").status_code == 429
    monkeypatch.setattr(gateway_site.security, "clock", lambda: NOW + 50)
    assert client_at(ip, bad_key()).get("/api/v1/batches").status_code == 401


def test_successful_requests_are_not_counted(limit, api_key):
    ip = fresh_ip()
    good = client_at(ip, api_key[1])
    assert [good.get("/api/v1/batches").status_code for _ in range(limit * 3)] == [200] * (limit * 3)
    assert client_at(ip, bad_key()).get("/api/v1/batches").status_code == 401


# --- client IP: X-Forwarded-For only from a configured trusted proxy ---------------------------------


def test_x_forwarded_for_is_ignored_without_a_trusted_proxy(limit, settings):
    settings.GATEWAY_TRUSTED_PROXIES = []
    ip = fresh_ip()
    for n in range(limit):  # a new forged X-Forwarded-For each time: still one client
        client_at(ip, bad_key(), HTTP_X_FORWARDED_FOR=f"203.0.113.{n}").get("/api/v1/batches")
    assert (
        client_at(ip, bad_key(), HTTP_X_FORWARDED_FOR="203.0.113.99").get("/api/v1/batches").status_code
        == 429
    )


def test_behind_a_trusted_proxy_the_rightmost_untrusted_address_is_the_client(limit, settings):
    from gateway_site.security import parse_networks

    proxy = fresh_ip()
    settings.GATEWAY_TRUSTED_PROXIES = parse_networks([proxy, "10.0.0.0/8"])
    attacker, honest = fresh_ip(), fresh_ip()
    for n in range(limit):
        # the attacker forges a left part; our proxies (10.x, then `proxy`) appended the real address
        forged = f"203.0.113.{n}, {attacker}, 10.1.2.3"
        client_at(proxy, bad_key(), HTTP_X_FORWARDED_FOR=forged).get("/api/v1/batches")
    blocked = client_at(proxy, bad_key(), HTTP_X_FORWARDED_FOR=f"192.0.2.1, {attacker}, 10.9.9.9")
    assert blocked.get("/api/v1/batches").status_code == 429
    other = client_at(proxy, bad_key(), HTTP_X_FORWARDED_FOR=f"{honest}, 10.1.2.3")
    assert other.get("/api/v1/batches").status_code == 401  # the proxy itself is not throttled


@pytest.mark.parametrize(
    "remote, forwarded, trusted, expected",
    [
        ("192.0.2.7", None, [], "192.0.2.7"),
        ("192.0.2.7", "1.2.3.4", [], "192.0.2.7"),  # untrusted peer: its header is ignored
        ("10.0.0.1", "1.2.3.4, 5.6.7.8", ["10.0.0.0/8"], "5.6.7.8"),
        ("10.0.0.1", "1.2.3.4, 10.0.0.2", ["10.0.0.0/8"], "1.2.3.4"),
        ("10.0.0.1", "10.0.0.3, 10.0.0.2", ["10.0.0.0/8"], "10.0.0.3"),  # all trusted: the leftmost
        ("10.0.0.1", "", ["10.0.0.0/8"], "10.0.0.1"),
        ("10.0.0.1", "garbage, 10.0.0.2", ["10.0.0.0/8"], "10.0.0.2"),  # unparsable: the last good hop
        ("::ffff:10.0.0.1", "2001:db8::1", ["10.0.0.0/8"], "2001:db8::1"),
        ("fd00::1", "[2001:db8::5]:4711", ["fd00::/8"], "2001:db8::5"),
        ("10.0.0.1", "198.51.100.4:5555", ["10.0.0.0/8"], "198.51.100.4"),
    ],
)
def test_client_ip(rf, remote, forwarded, trusted, expected):
    from gateway_site.security import client_ip, parse_networks

    meta = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        meta["HTTP_X_FORWARDED_FOR"] = forwarded
    request = rf.get("/", **meta)
    with override_settings(GATEWAY_TRUSTED_PROXIES=parse_networks(trusted)):
        assert client_ip(request) == expected


def test_a_bad_trusted_proxy_entry_refuses_to_start():
    from django.core.exceptions import ImproperlyConfigured

    from gateway_site.security import parse_networks

    with pytest.raises(ImproperlyConfigured, match="GATEWAY_TRUSTED_PROXIES.*'10.0.0.0/33'"):
        parse_networks(["10.0.0.1", "10.0.0.0/33"])


# --- Redis down: fail loudly (503), never a per-process count ----------------------------------------


def test_redis_down_answers_503_in_each_surface(limit, settings, api_key):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    ip = fresh_ip()
    api = client_at(ip, bad_key()).get("/api/v1/batches")
    assert api.status_code == 503 and int(api["Retry-After"]) > 0
    assert api.json()["dependency"] == "redis"
    v1 = client_at(ip, bad_key()).get("/v1/files")
    assert v1.status_code == 503 and int(v1["Retry-After"]) > 0
    assert "error" in v1.json()


def test_single_process_mode_counts_in_the_local_cache(limit, settings):
    from django.core.cache import caches

    settings.REDIS_URL = None
    caches["default"].clear()
    ip = fresh_ip()
    codes = [client_at(ip, bad_key()).get("/api/v1/batches").status_code for _ in range(limit + 2)]
    assert codes == [401] * limit + [429, 429]
