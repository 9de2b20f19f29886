"""AWS Signature Version 4 for one HTTP request (Bedrock's per-request auth): Django-free, no SDK.

https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html — the canonical request
(method, the URI path with each segment URI-encoded — twice, for every service but S3, as botocore
does —, the sorted query, the lower-cased signed headers with trimmed values, their names, the body's
SHA-256), the string to sign (``AWS4-HMAC-SHA256``, the time, the scope ``DATE/REGION/SERVICE/
aws4_request``, the canonical request's SHA-256), the signing key (HMAC-SHA256 chained over ``AWS4`` +
secret, date, region, service, ``aws4_request``) and the ``Authorization`` header.

Signed headers: ``host`` (from the URL, default ports left out), ``x-amz-date`` and every header given
in ``sign_headers`` that the request carries (``content-type``; ``x-amz-security-token`` with temporary
credentials). tests/engine/test_signing.py holds it to AWS's published test vectors and to botocore's
signer for the same inputs.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(f"AWS4{secret}".encode(), date)
    return _hmac(_hmac(_hmac(key, region), service), "aws4_request")


def host_header(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = parts.port
    return host if port is None or port == DEFAULT_PORTS.get(parts.scheme) else f"{host}:{port}"


def canonical_uri(path: str, *, double_encode: bool = True) -> str:
    """The path as signed: each segment URI-encoded (``/`` and ``~`` kept); for every service but S3 the
    already-encoded path is encoded again (``%3A`` in a Bedrock model id is signed as ``%253A``)."""
    path = path or "/"
    return quote(path, safe="/~") if double_encode else path


def canonical_query(query: str) -> str:
    pairs = []
    for item in query.split("&") if query else []:
        name, _, value = item.partition("=")
        pairs.append((quote(name, safe="-_.~"), quote(value, safe="-_.~")))
    return "&".join(f"{n}={v}" for n, v in sorted(pairs))


def canonical_request(
    method: str,
    url: str,
    headers: Mapping[str, str],
    signed: list[str],
    payload_hash: str,
    *,
    double_encode: bool = True,
) -> str:
    parts = urlsplit(url)
    lowered = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    lines = "".join(f"{name}:{lowered[name]}\n" for name in signed)
    return "\n".join(
        [
            method.upper(),
            canonical_uri(parts.path, double_encode=double_encode),
            canonical_query(parts.query),
            lines,
            ";".join(signed),
            payload_hash,
        ]
    )


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    credentials: Credentials,
    *,
    region: str,
    service: str,
    now: datetime | None = None,
    sign_headers: tuple[str, ...] = ("content-type",),
) -> dict[str, str]:
    """``headers`` plus ``Host``, ``X-Amz-Date`` (``X-Amz-Security-Token``) and ``Authorization`` for
    this request; the body is signed by its SHA-256."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    stamp, day = moment.strftime("%Y%m%dT%H%M%SZ"), moment.strftime("%Y%m%d")
    out = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "x-amz-date", "host")}
    out["Host"] = host_header(url)
    out["X-Amz-Date"] = stamp
    if credentials.session_token:
        out["X-Amz-Security-Token"] = credentials.session_token
    present = {k.lower() for k in out}
    wanted = {"host", "x-amz-date", "x-amz-security-token", *(h.lower() for h in sign_headers)}
    signed = sorted(present & wanted)
    request = canonical_request(method, url, out, signed, hashlib.sha256(body).hexdigest())
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
    key = signing_key(credentials.secret_access_key, day, region, service)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, SignedHeaders={';'.join(signed)}, "
        f"Signature={signature}"
    )
    return out
