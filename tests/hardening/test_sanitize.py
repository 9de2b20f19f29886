"""What a team sees of a provider's error: short, no hosts/IPs/URLs/secrets/header lines (#13).
Pre-fix the provider's message (or its whole text body) reached teams unfiltered."""

from __future__ import annotations

import pytest

from gateway_engine.answers import sanitize_message


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (
            "upstream 10.0.0.7:8443 failed, see https://internal.example/x",
            "upstream [address] failed, see [url]",
        ),
        ("connect to api.openai.com failed", "connect to [host] failed"),
        ("proxy gw-3.prod.svc.cluster.local:8080 refused", "proxy [host] refused"),
        ("host redis:6379 down", "host [host] down"),
        ("at localhost:8000", "at [host]"),
        ("fe80::1 and [2001:db8::1]:443 x", "[address] and [address] x"),
        ("Authorization: Bearer sk-abc123456789\nretry later", "retry later"),
        ("bad key sk-proj-abcdefghijkl", "bad key [redacted]"),
        # ordinary messages stay readable
        (
            "Invalid type for 'messages[0].content': expected string",
            "Invalid type for 'messages[0].content': expected string",
        ),
        ("model gpt-4.1 not found", "model gpt-4.1 not found"),
        ("time 12:30:45 ratio 1:2:3", "time 12:30:45 ratio 1:2:3"),
        ("nul\x00 and \ud800 and \x1b[31m", "nul\ufffd and \ufffd and  [31m"),
    ],
)
def test_sanitize_message(raw, shown):
    assert sanitize_message(raw) == shown


def test_messages_are_short_and_one_line():
    out = sanitize_message("x" * 5000 + "\nsecond line")
    assert len(out) == 200 and "\n" not in out
