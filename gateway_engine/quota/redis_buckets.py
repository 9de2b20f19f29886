"""The Redis token buckets: the ACQUIRE (ADMIT: with the provider's lease), RECONCILE, RELEASE, PENALIZE, UNPAUSE, SNAPSHOT and
INTERACTIVE_MARK / _COUNT scripts of lua.py, shared by every worker process."""

from __future__ import annotations

from typing import Any

from .adaptive import OUTSIDE_SHOWN_MS, RemainingQuota
from .buckets import TokenBuckets, log_pause
from .lua import settle_script
from .redis_conn import RedisConnection, pause_state
from .resp import Arg, Reply
from .team_quota import TeamQuota, TeamQuotaState
from .types import AdaptiveView, Decision, Lane, PauseState, ProviderLimits, ProviderQuotaState, SettleOutcome

PAUSED = 3  # ACQUIRE's status when the provider is paused
LEASES_HELD = 4  # ADMIT's status when every lease of the provider is held (nothing taken)


def rates(limits: ProviderLimits) -> list[Arg]:
    """The bucket ARGV every script takes first (lua.py): rate per ms and capacity of RPM, TPM, ITPM and
    OTPM (ITPM / OTPM "0": the limits do not set them)."""
    args: list[Arg] = [
        repr(limits.rpm_per_ms),
        repr(float(limits.rpm_capacity)),
        repr(limits.tpm_per_ms),
        repr(float(limits.tpm_capacity)),
    ]
    args += [repr(limits.itpm_per_ms), repr(float(limits.itpm_capacity))] if limits.itpm else UNSET
    args += [repr(limits.otpm_per_ms), repr(float(limits.otpm_capacity))] if limits.otpm else UNSET
    args.append("1" if limits.adaptive else "0")
    return args


UNSET: list[Arg] = ["0", "0"]


class RedisTokenBuckets(TokenBuckets):
    """Buckets and the team share buckets in Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__()
        self._conn = conn

    def _bucket_call(
        self,
        limits: ProviderLimits,
        amounts: tuple[int, int, int],
        team: TeamQuota | None,
    ) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV of ACQUIRE/RELEASE: the provider's buckets, then the team's (lua_team.py)."""
        tokens, input_tokens, output_tokens = amounts
        bucket, obs, _ = self._conn.provider_keys(limits.name)
        keys = [bucket, obs, self._conn.pause_key(limits.name)]
        # amounts for an ITPM / OTPM bucket the limits do not set are 0 (as in the in-process store)
        split = [int(input_tokens) if limits.itpm else 0, int(output_tokens) if limits.otpm else 0]
        share: list[Arg] = ["0", "0"]
        if team is not None and team.share_capped:
            keys.append(self._conn.share_key(limits.name, team.team))
            share = [repr(rate) for rate in team.share_rate(limits)]
        team_keys, team_args = self._team_part(team)
        return keys + team_keys, [*rates(limits), int(tokens), *split, *share, *team_args]

    def _team_part(self, team: TeamQuota | None) -> tuple[list[str], list[Arg]]:
        """The team bucket's optional KEYS and its four ARGV (RPM, TPM rate per ms and capacity; "0",
        "0" for one not set): lua_team.py. No keys for a team without an RPM / TPM limit."""
        if team is None or not team.rate_limited:
            return [], ["0"] * 4
        args: list[Arg] = []
        for per_ms, capacity in (team.rpm_rate, team.tpm_rate):
            args += [repr(per_ms), repr(capacity)] if per_ms else ["0", "0"]
        return list(self._conn.team_keys(team.team)), args

    async def try_acquire(
        self,
        limits: ProviderLimits,
        tokens: int = 0,
        input_tokens: int = 0,
        output_tokens: int = 0,
        *,
        lane: Lane = "batch",
        team: TeamQuota | None = None,
        lease_id: str | None = None,
    ) -> Decision:
        keys, args = self._bucket_call(limits, (tokens, input_tokens, output_tokens), team)
        # ACQUIRE's KEYS[4] is the interactive waiters' set, ARGV[13] whether this ask yields to them
        keys.insert(3, self._conn.interactive_key(limits.name))
        args.insert(12, "1" if lane == "batch" else "0")
        script = "ACQUIRE"
        if lease_id is not None:  # ADMIT: KEYS[5] the provider's leases, ARGV[20..22] the lease
            script = "ADMIT"
            keys.insert(4, self._conn.provider_keys(limits.name)[2])
            args += [lease_id, int(limits.max_concurrency), int(limits.lease_ttl_seconds * 1000)]
        reply = await self._conn.run(script, keys, args)
        status = int(reply[0])
        if status == PAUSED:
            raise pause_state(limits.name, reply[1:]).refusal()
        mark = (int(reply[3]), int(reply[4])) if status == 0 and len(reply) >= 5 else None
        team_wait = status == 1 and len(reply) >= 4 and int(reply[3]) == 1
        return Decision(
            status == 0,
            int(reply[1]) if status != LEASES_HELD else 0,
            float(reply[2]),
            impossible=status == 2,
            sent_mark=mark,
            team_wait=team_wait,
            lease_wait_ms=int(reply[1]) if status == LEASES_HELD else 0,
        )

    async def follow(
        self, limits: ProviderLimits, sent_mark: tuple[int, int] | None, quota: RemainingQuota
    ) -> None:
        bucket, _, _ = self._conn.provider_keys(limits.name)
        mark = sent_mark if sent_mark is not None else (-1, -1)
        said: list[Arg] = []
        for dim in (quota.requests, quota.tokens):
            said += (
                ["-1", "0"] if dim is None else [repr(float(dim.remaining)), repr(dim.reset_seconds * 1000.0)]
            )
        await self._conn.run("ADAPT", [bucket], [*rates(limits), int(mark[0]), int(mark[1]), *said])

    async def reconcile_delta(
        self,
        limits: ProviderLimits,
        deltas: tuple[int, int, int],
        team: TeamQuota | None = None,
        team_delta: int = 0,
        also: SettleOutcome | None = None,
    ) -> Reply:
        bucket, obs, _ = self._conn.provider_keys(limits.name)
        team_keys, team_args = self._team_part(team)
        args: list[Arg] = [*rates(limits), *(int(d) for d in deltas), "0", "0", *team_args, int(team_delta)]
        if also is None:
            await self._conn.run("RECONCILE", [bucket, obs, *team_keys], args)
            return None
        # SETTLE: the caller's step (its key last, its ARGV from 20) in the same atomic script
        keys = [bucket, obs, *team_keys, also.key]
        return await self._conn.run_text(settle_script(also.function), keys, [*args, *also.args])

    async def give_back(
        self, limits: ProviderLimits, amounts: tuple[int, int, int], team: TeamQuota | None = None
    ) -> None:
        await self._conn.run("RELEASE", *self._bucket_call(limits, amounts, team))

    async def team_snapshot(self, team: TeamQuota) -> TeamQuotaState:
        if not team.rate_limited:
            return TeamQuotaState(team.team, team.rpm, team.tpm)
        bucket, observed = self._conn.team_keys(team.team)
        _, args = self._team_part(team)
        reply = await self._conn.run("TEAM_SNAPSHOT", [bucket, observed], ["0", "0", *args])
        return TeamQuotaState.measured(
            team, (float(reply[0]), float(reply[1])), (int(reply[2]), int(reply[3]))
        )

    async def penalize(self, limits: ProviderLimits, retry_after_seconds: float) -> int:
        bucket, _, _ = self._conn.provider_keys(limits.name)
        ms = max(0.0, float(retry_after_seconds)) * 1000.0
        log_pause(limits.name, retry_after_seconds)
        return int(float(await self._conn.run("PENALIZE", [bucket], [*rates(limits), repr(ms)])))

    async def clear_pause(self, limits: ProviderLimits) -> None:
        bucket, _, _ = self._conn.provider_keys(limits.name)
        await self._conn.run("UNPAUSE", [bucket], [])

    async def set_pause(self, pause: PauseState) -> bool:
        until = "" if pause.until_epoch is None else repr(pause.until_epoch * 1000.0)
        reply = await self._conn.run("PAUSE_SET", [self._conn.pause_key(pause.provider)],
                                     [pause.reason, until, pause.message])  # fmt: skip
        return int(reply) == 1

    async def drop_pause(self, provider: str) -> bool:
        return int(await self._conn.command("DEL", self._conn.pause_key(provider))) == 1

    async def provider_pause(self, provider: str) -> PauseState | None:
        key = self._conn.pause_key(provider)
        fields = await self._conn.command("HMGET", key, "reason", "until", "message", "since")
        return None if fields[0] is None else pause_state(provider, fields)

    async def mark_interactive(self, provider: str, member: str, ttl_ms: int) -> None:
        await self._conn.run(
            "INTERACTIVE_MARK", [self._conn.interactive_key(provider)], [member, int(ttl_ms)]
        )

    async def unmark_interactive(self, provider: str, member: str) -> None:
        await self._conn.command("ZREM", self._conn.interactive_key(provider), member)

    async def interactive_waiters(self, provider: str) -> int:
        return int(await self._conn.run("INTERACTIVE_COUNT", [self._conn.interactive_key(provider)], []))

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        bucket, obs, leases = self._conn.provider_keys(limits.name)
        keys = [bucket, obs, leases, self._conn.pause_key(limits.name)]
        reply = await self._conn.run("SNAPSHOT", keys, rates(limits))
        r, tk, itk, otk, p, now = (float(v) for v in reply[:6])
        wait_ms, in_flight, obs_req, obs_tok = (int(v) for v in reply[6:10])
        return ProviderQuotaState.measured(
            limits,
            (r, tk, itk, otk),
            wait_ms=wait_ms,
            paused_until_ms=int(p) if p > now else 0,
            leases_in_flight=in_flight,
            observed=(obs_req, obs_tok),
            pause=None if reply[10] is None else pause_state(limits.name, reply[10:14]),
            adaptive=adaptive_view(reply[14:22], now),
        )


def adaptive_view(fields: list[Any], now: float) -> AdaptiveView:
    """SNAPSHOT's ra, ru, ta, tu, rx, rxt, tx, txt (the adjusted state) at ``now`` (server ms), per minute."""
    ra, ru, ta, tu, rx, rxt, tx, txt = (None if v is None else float(v) for v in fields)

    def rate(per_ms: float | None, until: float | None) -> float | None:
        return None if per_ms is None or until is None or until <= now else per_ms * 60_000.0

    def outside(per_ms: float | None, at: float | None) -> float | None:
        return None if per_ms is None or at is None or now - at > OUTSIDE_SHOWN_MS else per_ms * 60_000.0

    return AdaptiveView(rate(ra, ru), rate(ta, tu), outside(rx, rxt), outside(tx, txt))
