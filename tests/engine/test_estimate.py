"""The TPM reservation cannot be defeated by params (issue #29): ``n`` multiplies the completion budget,
and the larger of ``max_tokens`` / ``max_completion_tokens`` counts."""

from __future__ import annotations

import pytest

from gateway_engine import estimate_tokens

MSG = [{"role": "user", "content": "x" * 40}]  # 10 prompt tokens


@pytest.mark.parametrize(
    "params, expected",
    [
        ({}, 10 + 256),
        ({"max_tokens": 100}, 110),
        ({"max_completion_tokens": 100}, 110),
        ({"max_tokens": 10, "max_completion_tokens": 500}, 510),  # was 20: max_tokens won
        ({"max_tokens": 500, "max_completion_tokens": 10}, 510),
        ({"max_tokens": 100, "n": 128}, 10 + 100 * 128),  # was 110: 1/128 of what is billed
        ({"n": 3}, 10 + 256 * 3),
        ({"max_tokens": 100, "n": 0}, 110),  # not a positive count: one choice
        ({"max_tokens": True, "n": "x"}, 10 + 256),  # booleans and junk are no budgets
    ],
)
def test_reservation_counts_every_billed_token(params, expected):
    assert estimate_tokens(MSG, params, 256) == expected
