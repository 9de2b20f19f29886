"""Where a webhook may be sent (docs/contract.md §6, docs/webhooks.md): the one owner of that rule.

A ``webhook_url`` must be ``https://`` with a host, at most MAX_URL_CHARS, no user info. Unless
private targets are allowed (``GATEWAY_WEBHOOK_ALLOW_PRIVATE``, for local receivers and tests) it may
not name a loopback, private, link-local, unspecified, multicast, reserved or cloud-metadata address —
as a literal here, at submission (IPv4-mapped IPv6 and the legacy numeric IPv4 forms ``2130706433``,
``0x7f.1`` included). A name is resolved at delivery and every address it resolves to is checked with
``address_refusal`` (webhooks/delivery.py), which connects only to a checked address.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import SplitResult, urlsplit

MAX_URL_CHARS = 2048
FIELD = "webhook_url"
_NUMERIC_HOST = re.compile(r"^[0-9a-fA-FxX.]+$")
# shared address space (carrier-grade NAT) is not "private" to ipaddress, nor reachable from outside
_SHARED = ipaddress.ip_network("100.64.0.0/10")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookUrlError(ValueError):
    """Why a webhook URL is refused (the message names no field; callers say ``webhook_url``)."""


def address_refusal(address: IPAddress) -> str | None:
    """Why a webhook may not be sent to ``address`` when private targets are not allowed, or None."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        mapped = address_refusal(address.ipv4_mapped)
        return f"{mapped} (IPv4-mapped {address})" if mapped else None
    if address.is_loopback:
        return f"{address} is a loopback address"
    if address.is_link_local:
        return f"{address} is a link-local address (cloud metadata lives there)"
    if address.is_unspecified:
        return f"{address} is the unspecified address"
    if address.is_multicast:
        return f"{address} is a multicast address"
    if address.is_private or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED):
        return f"{address} is a private address"
    if address.is_reserved or not address.is_global:
        return f"{address} is not a public address"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells literally (also ``2130706433`` and ``0x7f.1``, which resolvers read as
    IPv4), or None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_HOST.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def parse(url: str) -> SplitResult:
    """The URL split, or WebhookUrlError (no scheme check: see ``check``)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        raise WebhookUrlError(f"is not a valid URL ({exc})") from None
    if not parts.hostname:
        raise WebhookUrlError("must be an absolute URL with a host, e.g. https://hooks.example.com/batch")
    if parts.username is not None or parts.password is not None:
        raise WebhookUrlError("must not carry a user name or password")
    return parts


def check(url: object, *, allow_private: bool) -> str:
    """The URL as given when it may be stored, else WebhookUrlError saying why."""
    if not isinstance(url, str):
        raise WebhookUrlError(f"must be a string URL, got {type(url).__name__}")
    if len(url) > MAX_URL_CHARS:
        raise WebhookUrlError(f"is {len(url)} characters; at most {MAX_URL_CHARS}")
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        raise WebhookUrlError("must not contain spaces or control characters")
    parts = parse(url)
    schemes = ("https", "http") if allow_private else ("https",)
    if parts.scheme.lower() not in schemes:
        hint = "" if allow_private else " (http:// only with GATEWAY_WEBHOOK_ALLOW_PRIVATE on)"
        raise WebhookUrlError(f"must be an https:// URL{hint}")
    address = literal_address(parts.hostname or "")
    if address is not None and not allow_private:
        refusal = address_refusal(address)
        if refusal:
            raise WebhookUrlError(f"refused: {refusal} (allowed only with GATEWAY_WEBHOOK_ALLOW_PRIVATE on)")
    return url
