"""The Redis token buckets: the ACQUIRE, RECONCILE, RELEASE, PENALIZE, UNPAUSE and SNAPSHOT scripts of
lua.py, shared by every worker process."""

from __future__ import annotations

from .buckets import TokenBuckets, log_pause
from .redis_conn import RedisConnection, pause_state
from .resp import Arg
from .types import Decision, PauseState, ProviderLimits, ProviderQuotaState

PAUSED = 3  # ACQUIRE's status when the provider is paused


def rates(limits: ProviderLimits) -> list[Arg]:
    """The bucket ARGV every script takes first: rpm rate per ms, rpm capacity, tpm rate, tpm capacity."""
    return [
        repr(limits.rpm_per_ms),
        repr(float(limits.rpm_capacity)),
        repr(limits.tpm_per_ms),
        repr(float(limits.tpm_capacity)),
    ]


class RedisTokenBuckets(TokenBuckets):
    """Buckets and the team share buckets in Redis."""

    def __init__(self, conn: RedisConnection) -> None:
        super().__init__()
        self._conn = conn

    def _bucket_call(self, limits: ProviderLimits, tokens: int) -> tuple[list[str], list[Arg]]:
        """KEYS and ARGV of ACQUIRE/RELEASE: the provider's buckets, plus the team share bucket."""
        bucket, obs, _ = self._conn.provider_keys(limits.name)
        keys, args = [bucket, obs, self._conn.pause_key(limits.name)], [*rates(limits), int(tokens)]
        if limits.team_capped:
            keys.append(f"{self._conn.prefix}q:{{{limits.name}}}:tm:{limits.team}")
            args += [repr(limits.team_rpm_per_ms), repr(float(limits.team_rpm_capacity))]
        return keys, args

    async def try_acquire(self, limits: ProviderLimits, tokens: int = 0) -> Decision:
        reply = await self._conn.run("ACQUIRE", *self._bucket_call(limits, tokens))
        status = int(reply[0])
        if status == PAUSED:
            raise pause_state(limits.name, reply[1:]).refusal()
        return Decision(status == 0, int(reply[1]), float(reply[2]), impossible=status == 2)

    async def reconcile_delta(self, limits: ProviderLimits, delta_tokens: int) -> None:
        bucket, obs, _ = self._conn.provider_keys(limits.name)
        await self._conn.run("RECONCILE", [bucket, obs], [*rates(limits), int(delta_tokens)])

    async def give_back(self, limits: ProviderLimits, tokens: int) -> None:
        await self._conn.run("RELEASE", *self._bucket_call(limits, tokens))

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

    async def snapshot(self, limits: ProviderLimits) -> ProviderQuotaState:
        bucket, obs, leases = self._conn.provider_keys(limits.name)
        r, tk, p, now, wait_ms, in_flight, obs_req, obs_tok = await self._conn.run(
            "SNAPSHOT", [bucket, obs, leases], rates(limits)
        )
        paused_until = float(p)
        return ProviderQuotaState(
            provider=limits.name,
            rpm_tokens_available=float(r),
            rpm_capacity=limits.rpm_capacity,
            tpm_tokens_available=float(tk),
            tpm_capacity=limits.tpm_capacity,
            wait_ms=int(wait_ms),
            paused_until_ms=int(paused_until) if paused_until > float(now) else 0,
            leases_in_flight=int(in_flight),
            max_concurrency=limits.max_concurrency,
            configured_rpm=limits.rpm,
            configured_tpm=limits.tpm,
            observed_rpm=int(obs_req),
            observed_tpm=int(obs_tok),
        )
