"""Does the web server rewrite the client address from ``X-Forwarded-For`` on its own?

uvicorn (plain ``uvicorn …``, or its gunicorn worker) believes proxy headers from 127.0.0.1 by default
(``--forwarded-allow-ips``, ``FORWARDED_ALLOW_IPS``) and replaces the ASGI ``client`` before the gateway
sees the request — then ``GATEWAY_TRUSTED_PROXIES`` no longer decides whose ``X-Forwarded-For`` is
believed (gateway_site/security.py), and a caller on the same host as the server escapes the failed-key
throttle and the admin lockout by sending a new ``X-Forwarded-For`` each time. The documented server
(gunicorn with gateway_site.web_worker, gunicorn.conf.py) turns uvicorn's rewriting off; this module finds
out at start-up, from the lifespan call, whether some other server's rewriting wraps the application,
and says so when its trusted list differs from the setting."""

from __future__ import annotations

import ipaddress
from types import FrameType

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def server_trusted(frame: FrameType | None) -> tuple[bool, frozenset[Network], bool] | None:
    """(trusts everyone, trusted networks, has non-address entries) of a uvicorn ProxyHeadersMiddleware
    among the callers of ``frame`` (the lifespan call passes through it), or None when none wraps us."""
    from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, ProxyHeadersMiddleware):
            hosts = owner.trusted_hosts
            networks = {ipaddress.ip_network(host) for host in hosts.trusted_hosts}
            networks |= set(hosts.trusted_networks)
            return bool(hosts.always_trust), frozenset(networks), bool(hosts.trusted_literals)
        frame = frame.f_back
    return None


def proxy_headers_warning(frame: FrameType | None) -> str | None:
    """The start-up warning when the server's own proxy-header trust differs from GATEWAY_TRUSTED_PROXIES."""
    found = server_trusted(frame)
    if found is None:
        return None
    always, networks, literals = found
    ours = frozenset(settings.GATEWAY_TRUSTED_PROXIES)
    if not always and not literals and networks == ours:
        return None
    theirs = "every peer (*)" if always else ", ".join(sorted(map(str, networks))) or "none"
    return (
        f"the web server rewrites the client address from X-Forwarded-For for peers {theirs} (uvicorn's "
        f"proxy headers: --forwarded-allow-ips / FORWARDED_ALLOW_IPS), but GATEWAY_TRUSTED_PROXIES is "
        f"{', '.join(map(str, ours)) or 'empty'}: the failed-key throttle and the admin lockout count the "
        "address the server chose. Start the documented server (gunicorn, gunicorn.conf.py) or pass "
        '--no-proxy-headers (docs/operations.md, "Which headers are trusted").'
    )
