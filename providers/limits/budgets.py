"""A team's token budget ledger, read, charged and reset from sync code (the admin, the submission
check, the result writer for items served outside the engine, the team-saved signal), and the team's
RPM / TPM use (``rate_usage``: the usage page, /api/v1/usage, the Team admin).

The ledger itself (reserve before each send, settle to the provider's reported usage after it) lives
in the quota store (gateway_engine/quota/base.py `reserve_budget` / `settle_budget`, Redis keys
``{prefix}budget:{<team>}:d:<YYYY-MM-DD>`` and ``…:m:<YYYY-MM>``), shared by every worker; a missing
ledger is re-seeded from the database (teams.usage.seed_budget_from_db). See docs/quota.md
"Team budgets".
"""

from __future__ import annotations

import asyncio
import threading

from gateway_engine.quota.team_quota import TeamQuotaState
from gateway_engine.quota.types import BudgetReservation
from teams.limits import team_limits
from teams.models import Team
from teams.usage import seed_budget_from_db

from .factory import get_quota_store


def budget_usage(team: Team) -> list[tuple[str, int | None, int]]:
    """[(period, limit or None, used)] for today and this month, from the shared ledger (seeding it
    from the database if it is missing). Raises QuotaStoreUnavailable if Redis is down."""
    return _run(get_quota_store().budget_usage, team_limits(team), seed_budget_from_db)


def rate_usage(team: Team) -> TeamQuotaState:
    """The team's RPM / TPM buckets across providers and its use in the last 60 s, from the shared
    store (counted only while the team has an RPM or TPM limit). Raises QuotaStoreUnavailable if Redis
    is down."""
    return _run(get_quota_store().team_snapshot, team_limits(team).quota())


def charge_budget(team: Team, tokens: int) -> None:
    """Count tokens a result served outside the engine used (batches.execution.apply): a team without
    budgets is not counted (as the engine only reserves for teams with a budget). Raises
    QuotaStoreUnavailable if Redis is down."""
    limits = team_limits(team)
    if limits.has_budget and tokens > 0:
        _run(get_quota_store().charge_budget, limits, int(tokens))


def reserve_tokens(team: Team, tokens: int) -> BudgetReservation | None:
    """Reserve ``tokens`` on the team's ledger ahead of work served outside the engine (a provider
    batch's discounted estimate at its create); None for a team without budgets. Raises BudgetExceeded
    (nothing taken) when a period has no room, QuotaStoreUnavailable if Redis is down."""
    limits = team_limits(team)
    if not limits.has_budget or tokens <= 0:
        return None
    return _run(get_quota_store().reserve_budget, limits, int(tokens), seed_budget_from_db)


def give_back_tokens(team_name: str, keys: list[str], tokens: int) -> None:
    """Give a ``reserve_tokens`` reservation back once the work's reported usage was charged (by the
    result writer): the ledger ends at the reported usage."""
    if keys and tokens > 0:
        _run(get_quota_store().give_back_budget, BudgetReservation(team_name, tuple(keys), int(tokens)))


def forget_ledger_if_unbudgeted(team: Team) -> None:
    """On commit of a team save: a team without budgets is not counted, so its ledger is dropped (a
    budget set again later starts from the database, not from a stale count)."""
    limits = team_limits(team)
    if limits.has_budget:
        return
    _run(get_quota_store().forget_budget, limits)


def _run(fn, *args):
    """Run a store coroutine from sync code (its own short event loop, in a thread if one is running)."""

    async def main():
        store = get_quota_store()
        try:
            return await fn(*args)
        finally:
            await store.aclose()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    out: list = []

    def target() -> None:
        try:
            out.append((True, asyncio.run(main())))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            out.append((False, exc))

    thread = threading.Thread(target=target, name="budget-usage")
    thread.start()
    thread.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value
