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
) -> tuple[str, str] | None:
    auth = headers.get("Authorization")
    if not auth:
        return "MissingAuthenticationTokenException", "Missing Authentication Token"
    m = AUTH_RE.match(auth)
    if m is None:
        return (
            "IncompleteSignatureException",
            f"Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters. Authorization={auth[:40]}",
        )
    key_id, day, scope_region, service, signed, signature = m.groups()
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
    stamp = headers.get("X-Amz-Date", "")
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
    if secret is None:
        return None  # no secret configured: the form is checked, not the signature
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
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    expected = hmac.new(
        _key(secret, day, scope_region, service), to_sign.encode(), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, signature):
        return "InvalidSignatureException", MISMATCH
    return None
