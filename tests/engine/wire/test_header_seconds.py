"""gateway_engine.retry.header_seconds reads RFC 3339 / ISO 8601 times (Anthropic's resets) beside
the formats it read before; a time without a zone is unreadable, a past one waits 0."""

from __future__ import annotations

import pytest

from gateway_engine.retry import header_seconds, parse_reset_duration, parse_retry_after, rate_limit_wait

NOW = 1_796_139_148.0  # 2026-12-01T15:32:28Z


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("2026-12-01T15:32:30Z", 2.0),
        ("2026-12-01T15:32:30z", 2.0),
        ("2026-12-01T15:32:28.5Z", 0.5),
        ("2026-12-01T15:32:30.250000+00:00", 2.25),
        ("2026-12-01T16:32:30+01:00", 2.0),
        ("2026-12-01T07:32:38-08:00", 10.0),
        ("2026-12-01 15:33:28Z", 60.0),
        ("2026-12-01T15:00:00Z", 0.0),  # past
        ("Tue, 01 Dec 2026 15:32:30 GMT", 2.0),  # HTTP dates still read
        ("6m0s", 360.0),
        ("1.5", 1.5),
    ],
)
def test_times_and_durations(value, seconds):
    assert header_seconds(value, now=NOW) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "value", ["2026-12-01T15:32:30", "2026-13-01T15:32:30Z", "2026-12-01Tnoon", "2026-12-01"]
)
def test_unreadable_times(value):
    assert header_seconds(value, now=NOW) is None


def test_reset_and_retry_after_parsers_take_rfc_3339_and_keep_the_ceiling():
    assert parse_reset_duration("2026-12-01T15:33:28Z", NOW) == 60.0
    assert parse_retry_after("2026-12-01T15:32:38Z", NOW) == 10.0
    assert parse_reset_duration("2026-12-02T15:32:28Z", NOW) is None  # a day: beyond the ceiling
    assert (
        rate_limit_wait(
            {
                "x-ratelimit-reset-tokens": "2026-12-01T15:32:50Z",
                "x-ratelimit-reset-requests": "2026-12-01T15:32:40Z",
            },
            now=NOW,
        )
        == 22.0
    )
