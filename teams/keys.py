"""API key material: generation and hashing. The raw key is never stored."""

from __future__ import annotations

import hashlib
import secrets

KEY_PREFIX = "bgw_"
VISIBLE_PREFIX_LEN = 12  # "bgw_" + 8 random characters, enough to tell keys apart in lists


def generate_raw_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(raw: str) -> str:
    # The key carries 256 bits of randomness, so a fast unsalted digest is safe and lets us look
    # keys up by index; a password hash (PBKDF2 etc.) would only add latency to every request.
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def visible_prefix(raw: str) -> str:
    return raw[:VISIBLE_PREFIX_LEN]
