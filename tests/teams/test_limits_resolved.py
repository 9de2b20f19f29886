"""teams/limits.py resolves every per-team limit: the team's own value, else the deployment's default
setting (gateway_site/settings/teams.py, files.py); the engine's TeamLimits carries the live ones."""

from __future__ import annotations

import pytest

from teams.limits import limits_of, team_limits

pytestmark = pytest.mark.django_db


def test_defaults_come_from_the_settings(team, settings):
    settings.GATEWAY_TEAM_MAX_PENDING_ITEMS = 11
    settings.GATEWAY_TEAM_MAX_OPEN_BATCHES = 12
    settings.GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE = 13
    settings.GATEWAY_FILES_MAX_PER_TEAM = 14
    settings.GATEWAY_FILES_MAX_BYTES_PER_TEAM = 15_000
    settings.GATEWAY_TEAM_BURST_SECONDS = 3.0
    got = limits_of(team)
    assert (got.max_pending_items, got.max_open_batches, got.max_submissions_per_minute) == (11, 12, 13)
    assert (got.max_stored_files, got.max_stored_file_bytes) == (14, 15_000)
    assert got.rpm_limit is got.tpm_limit is got.daily_token_budget is got.max_provider_share is None
    assert got.burst_seconds == 3.0 and not got.has_budget


def test_a_teams_own_values_win_and_reach_the_engine(team, settings):
    settings.GATEWAY_TEAM_MAX_PENDING_ITEMS = 11
    team.max_pending_items, team.max_stored_files, team.rpm_limit, team.tpm_limit = 5, 6, 120, 9_000
    team.max_provider_share, team.daily_token_budget = 0.5, 1_000
    got = limits_of(team)
    assert (got.max_pending_items, got.max_stored_files, got.rpm_limit, got.tpm_limit) == (5, 6, 120, 9_000)
    quota = team_limits(team).quota()
    assert (quota.team, quota.share, quota.rpm, quota.tpm) == ("acme", 0.5, 120, 9_000)
    assert quota.rate_limited and quota.share_capped and team_limits(team).has_budget
