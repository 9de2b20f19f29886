"""A batch run against a provider whose 401 echoes the key it was given (a key of no known shape): the item's
error message (what the batch results carry) and its attempt log say ``[redacted]``, never the key. Before:
only ``sk-``/``key-``/``Bearer`` shapes were taken out (tests/hardening/test_key_echo.py: each kind)."""

from __future__ import annotations

import dataclasses

from tests.factories import work_item

from .provider_server import Reply
from .test_batcher import provider
from .test_provider_pause import run

KEY = "Zq9tL2pW7xK4mR8vB3nJ6cH1fD5gS0aY"
ECHO = {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "invalid_request_error"}}


def test_the_batch_result_and_attempt_log_never_carry_the_echoed_key(provider_server, redis_sync):
    provider_server.behaviours["leaky"] = lambda n, r, a, b: Reply(401, body=ECHO)
    leaky = dataclasses.replace(provider(provider_server, "leaky", max_concurrency=1), api_key=KEY)
    results, _, _ = run([leaky], [work_item("i0", provider="leaky")], tag="keyecho")
    result = results["i0"]
    assert provider_server.count("leaky") == 1 and result.error_status_code == 401
    assert "[redacted]" in result.error_message and KEY not in result.error_message
    assert KEY not in repr(result.attempt_log) and "[redacted]" in repr(result.attempt_log)
