"""The simulated Bedrock's check of a request's AWS Signature Version 4 (the server's side of
https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html), written apart from the
gateway's signer (the simulator imports nothing of the project): the ``Authorization`` header's form,
the credential scope (access key id, region, service ``bedrock``), ``X-Amz-Date`` within 15 minutes,
``host`` and ``x-amz-date`` among the signed headers, then the signature recomputed from the raw
request — method, the path as sent encoded once more, the sorted query, the signed headers as sent,
the body's SHA-256 — with the configured secret access key.

``problem(...)`` is None for a good signature, else (exception type, message) as AWS words them."""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import UTC, datetime
from urllib.parse import quote, unquote

AUTH_RE = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=([^/,\s]+)/(\d{8})/([^/,\s]+)/([^/,\s]+)/aws4_request,\s*"
    r"SignedHeaders=([a-z0-9;\-]+),\s*Signature=([0-9a-f]{64})$"
)
MAX_SKEW_S = 15 * 60
SERVICE = "bedrock"
MISMATCH = (
    "The request signature we calculated does not match the signature you provided. Check your "
    "AWS Secret Access Key and signing method. Consult the service documentation for details."
)


def _key(secret: str, day: str, region: str, service: str) -> bytes:
    key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def _query(raw: str) -> str:
    pairs = sorted(
        (quote(unquote(n), safe="-_.~"), quote(unquote(v), safe="-_.~"))
        for n, _, v in (item.partition("=") for item in raw.split("&") if item)
    )
    return "&".join(f"{n}={v}" for n, v in pairs)


Problem = tuple[str, str] | None


def _scope(groups: tuple[str, ...], access_key_id: str | None, region: str | None) -> Problem:
    """The credential scope and the signed header list of a well-formed Authorization header."""
    key_id, _day, scope_region, service, signed, _signature = groups
    if access_key_id is not None and key_id != access_key_id:
        return "UnrecognizedClientException", "The security token included in the request is invalid."
    if region is not None and scope_region != region:
        return (
            "InvalidSignatureException",
            f"Credential should be scoped to a valid region, not '{scope_region}'.",
        )
    if service != SERVICE:
        return "InvalidSignatureException", f"Credential should be scoped to correct service: '{SERVICE}'."
    names = signed.split(";")
    if "host" not in names or "x-amz-date" not in names or names != sorted(names):
        return "InvalidSignatureException", "'Host' and 'X-Amz-Date' must be signed, in sorted order."
    return None


def _date(stamp: str, day: str, now: datetime | None) -> Problem:
    """X-Amz-Date: readable, the scope's day, within the allowed skew."""
    try:
        when = datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "IncompleteSignatureException", "Date must be in ISO-8601 'basic format'."
    if stamp[:8] != day:
        return (
            "InvalidSignatureException",
            "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP",
        )
    if abs(((now or datetime.now(UTC)) - when).total_seconds()) > MAX_SKEW_S:
        return (
            "InvalidSignatureException",
            f"Signature expired: {stamp} is now earlier than the allowed skew.",
        )
    return None


def _signature(
    method: str, raw_path: str, query: str, headers, body: bytes, groups: tuple[str, ...], secret: str
) -> Problem:
    """The signature recomputed from the request as received, with the configured secret."""
    _key_id, day, scope_region, service, signed, signature = groups
    names = signed.split(";")
    missing = [n for n in names if n not in headers]
    if missing:
        return "InvalidSignatureException", f"Signed header {missing[0]!r} is not in the request."
    lines = "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names)
    canonical = "\n".join(
        [
            method,
            quote(raw_path or "/", safe="/~"),
            _query(query),
            lines,
            signed,
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{day}/{scope_region}/{service}/aws4_request"
    stamp = headers.get("X-Amz-Date", "")
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _key(secret, day, scope_region, service)
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(expected, signature) else ("InvalidSignatureException", MISMATCH)


def problem(
    method: str,
    raw_path: str,
    query: str,
    headers,
    body: bytes,
    *,
    access_key_id: str | None,
    secret: str | None,
    region: str | None,
    now: datetime | None = None,
) -> Problem:
    auth = headers.get("Authorization")
    if not auth:
        return "MissingAuthenticationTokenException", "Missing Authentication Token"
    m = AUTH_RE.match(auth)
    if m is None:
        return (
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters. "
            f"Authorization={auth[:40]}",
        )
    groups = m.groups()
    found = _scope(groups, access_key_id, region) or _date(headers.get("X-Amz-Date", ""), groups[1], now)
    if found is not None or secret is None:  # no secret configured: the form is checked, not the signature
        return found
    return _signature(method, raw_path, query, headers, body, groups, secret)
