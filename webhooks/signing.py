"""Standard Webhooks signing (docs/contract.md §6): secrets and the ``webhook-*`` headers.

The secret is ``whsec_`` + base64 of 32 random bytes; the HMAC key is the base64-decoded part after
``whsec_``. ``webhook-signature`` is ``v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>``, one
per active secret, space-separated (during a rotation's overlap: the new one first, then the old).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import secrets as random_secrets

PREFIX = "whsec_"
OVERLAP = dt.timedelta(hours=24)  # after a rotation the previous secret also signs this long


def new_secret() -> str:
    return PREFIX + base64.b64encode(random_secrets.token_bytes(32)).decode()


def key_of(secret: str) -> bytes:
    """The HMAC key: the base64-decoded part after ``whsec_``. ValueError for a malformed secret."""
    if not secret.startswith(PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    return base64.b64decode(secret[len(PREFIX) :], validate=True)


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key_of(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def headers(msg_id: str, timestamp: int, body: bytes, secrets: list[str]) -> dict[str, str]:
    """The three Standard Webhooks headers for one attempt, signed with every secret in ``secrets``."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(s, msg_id, timestamp, body) for s in secrets),
    }


def active_secrets(
    secret: str, previous_secret: str, rotated_at: dt.datetime | None, now: dt.datetime
) -> list[str]:
    """The secrets that sign now: the current one, and the previous one within OVERLAP of a rotation."""
    out = [secret]
    if previous_secret and rotated_at is not None and now - rotated_at < OVERLAP:
        out.append(previous_secret)
    return out
