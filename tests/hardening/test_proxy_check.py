"""The start-up warning when the web server rewrites the client address itself (uvicorn's proxy headers,
on by default for 127.0.0.1) with a trusted list other than GATEWAY_TRUSTED_PROXIES — found from the
lifespan call that passes through uvicorn's ProxyHeadersMiddleware."""

from __future__ import annotations

import asyncio
import sys

import pytest
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from gateway_site.proxy_check import proxy_headers_warning
from gateway_site.security import parse_networks


def warning_at_startup(app_wrapper) -> str | None:
    seen = {}

    async def app(scope, receive, send):
        seen["warning"] = proxy_headers_warning(sys._getframe())

    async def nothing():
        return {}

    async def ignore(message):
        return None

    asyncio.run(app_wrapper(app)({"type": "lifespan"}, nothing, ignore))
    return seen["warning"]


@pytest.mark.parametrize(
    ("server_trusts", "ours", "warns"),
    [
        ("127.0.0.1,::1", [], True),  # uvicorn's default, the setting empty: the finding
        ("*", ["10.0.0.0/8"], True),
        ("127.0.0.1", ["127.0.0.1"], False),  # both believe the same proxy
        ("10.0.0.0/8", ["10.0.0.0/8"], False),
    ],
)
def test_the_servers_own_rewriting_is_reported_when_it_differs(settings, server_trusts, ours, warns):
    settings.GATEWAY_TRUSTED_PROXIES = parse_networks(ours)
    warning = warning_at_startup(lambda app: ProxyHeadersMiddleware(app, trusted_hosts=server_trusts))
    assert (warning is not None) == warns, warning
    if warns:
        assert "GATEWAY_TRUSTED_PROXIES" in warning and "--no-proxy-headers" in warning


def test_no_warning_without_the_servers_rewriting(settings):
    settings.GATEWAY_TRUSTED_PROXIES = ()
    assert warning_at_startup(lambda app: app) is None
