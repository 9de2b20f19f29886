"""The defaults of a team's limits (teams/limits.py resolves them: a team's own value in the admin
overrides each); ``base`` imports them all (``from .teams import *``). The /v1 file quotas' defaults
sit with the other files settings (files.py)."""

from __future__ import annotations

from gateway_site.env import env_float, env_int

# queued work (batches/submission/queue_limits.py)
GATEWAY_TEAM_MAX_PENDING_ITEMS = env_int("GATEWAY_TEAM_MAX_PENDING_ITEMS", 200_000, minimum=1)
GATEWAY_TEAM_MAX_OPEN_BATCHES = env_int("GATEWAY_TEAM_MAX_OPEN_BATCHES", 500, minimum=1)
GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE = env_int("GATEWAY_TEAM_MAX_SUBMISSIONS_PER_MINUTE", 120, minimum=1)
# a team's RPM / TPM limit across all providers (Team.rpm_limit / tpm_limit): its buckets hold this
# many seconds of the rate (a burst), the rest refills at the rate (gateway_engine/quota/team_quota.py)
GATEWAY_TEAM_BURST_SECONDS = env_float("GATEWAY_TEAM_BURST_SECONDS", 10.0, minimum=0.05, maximum=60.0)
