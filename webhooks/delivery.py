"""The one module that sends webhook HTTP: one POST per call, synchronous (a Celery task's body).

* The host is resolved here, and — unless ``allow_private`` (GATEWAY_WEBHOOK_ALLOW_PRIVATE) — EVERY
  address it resolves to is checked (``batches.submission.webhook_url.address_refusal``) before
  anything connects; one refused address refuses the target (not retried: the caller logs it).
* The connection goes to a checked address itself (``PinnedHTTPConnection``): no second DNS lookup,
  so a name that changes its answer between the check and the connect (DNS rebinding) gains nothing.
  TLS still verifies the certificate against the URL's host name (SNI too).
* Redirects are not followed (http.client never does; a 3xx is a failed attempt), one timeout bounds
  the connect and each read, the whole attempt is cut at the same deadline, and at most
  MAX_RESPONSE_BYTES of the answer are read (an excerpt is kept for the log).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass

from batches.submission import webhook_url

MAX_RESPONSE_BYTES = 64 * 1024
EXCERPT_CHARS = 512
USER_AGENT = "batch-gateway-webhooks/1"

Resolver = Callable[[str, int], list[str]]


@dataclass(frozen=True)
class Outcome:
    status_code: int | None = None
    latency_ms: int = 0
    error: str = ""
    refused: bool = False  # the target is not allowed: never retried
    address: str = ""
    excerpt: str = ""

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (in the resolver's order, each once)."""
    found: list[str] = []
    for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = str(info[4][0]).split("%", 1)[0]  # an IPv6 zone id is not part of the address
        if address not in found:
            found.append(address)
    return found


class PinnedHTTPConnection(http.client.HTTPConnection):
    """HTTP to ``address`` while the request names ``host`` (Host header)."""

    def __init__(self, host: str, port: int, address: str, timeout: float):
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """HTTPS to ``address``; the certificate is verified for ``host`` (and SNI names it)."""

    def __init__(self, host: str, port: int, address: str, timeout: float):
        self.tls = ssl.create_default_context()
        super().__init__(host, port, timeout=timeout, context=self.tls)
        self.address = address

    def connect(self) -> None:
        raw = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self.tls.wrap_socket(raw, server_hostname=self.host)


def refusal(addresses: list[str]) -> str | None:
    """Why one of the resolved addresses may not be connected to, or None when all are allowed."""
    for address in addresses:
        why = webhook_url.address_refusal(ipaddress.ip_address(address))
        if why:
            return why
    return None


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
    allow_private: bool,
    resolver: Resolver = resolve,
) -> Outcome:
    """POST ``body`` to ``url`` once; never raises for anything the network or the receiver does."""
    started = time.monotonic()

    def done(**kw: object) -> Outcome:
        return Outcome(latency_ms=int((time.monotonic() - started) * 1000), **kw)  # type: ignore[arg-type]

    try:
        parts = webhook_url.parse(url)
    except webhook_url.WebhookUrlError as exc:
        return done(refused=True, error=f"webhook_url {exc}")
    scheme = parts.scheme.lower()
    if scheme not in (("https", "http") if allow_private else ("https",)):
        return done(refused=True, error=f"webhook_url must be https:// (got {scheme}://)")
    host = parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    try:
        addresses = resolver(host, port)
    except OSError as exc:
        return done(error=f"could not resolve {host}: {exc}")
    if not addresses:
        return done(error=f"{host} resolves to no address")
    if not allow_private:
        why = refusal(addresses)
        if why:
            return done(refused=True, error=f"refused: {host} resolves to {why}")
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return _send(scheme, host, port, addresses, target, body, headers, timeout, done)


def _send(scheme, host, port, addresses, target, body, headers, timeout, done) -> Outcome:
    deadline = time.monotonic() + timeout
    cls = PinnedHTTPSConnection if scheme == "https" else PinnedHTTPConnection
    last_error = ""
    for address in addresses:  # the next checked address when one does not accept the connection
        conn = cls(host, port, address, timeout)
        try:
            try:
                conn.connect()
            except OSError as exc:
                last_error = f"connect to {address}: {exc}"
                if isinstance(exc, ssl.SSLError) or time.monotonic() >= deadline:
                    return done(error=f"TLS: {exc}" if isinstance(exc, ssl.SSLError) else last_error)
                continue
            sent = {
                "content-type": "application/json",
                "user-agent": USER_AGENT,
                **headers,
            }
            conn.request("POST", target, body=body, headers=sent)
            response = conn.getresponse()
            excerpt = _read_capped(response, conn, deadline)
            return done(status_code=response.status, address=address, excerpt=excerpt)
        except TimeoutError:
            return done(error=f"timeout after {timeout:g} s", address=address)
        except (http.client.HTTPException, OSError) as exc:
            return done(error=f"{type(exc).__name__}: {exc}", address=address)
        finally:
            conn.close()
    return done(error=last_error or "no address accepted the connection")


def _read_capped(
    response: http.client.HTTPResponse, conn: http.client.HTTPConnection, deadline: float
) -> str:
    """At most MAX_RESPONSE_BYTES of the answer, read before the deadline; an excerpt of it as text."""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_RESPONSE_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if conn.sock is not None:
            conn.sock.settimeout(left)
        try:
            chunk = response.read1(min(16 * 1024, MAX_RESPONSE_BYTES - size))
        except (TimeoutError, OSError, http.client.HTTPException):
            break  # the status line decided the attempt; the body is only an excerpt for the log
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:EXCERPT_CHARS].decode("utf-8", "replace")
