"""The Django side of the quota engine (gateway_engine.quota): the process-wide store chosen by settings
(factory.py), the live limits read from the database (providers and teams, source.py), reloaded on
every config change, and the team budget ledger read from sync code (budgets.py).

    from providers.limits import get_quota_store, LimitsSource

    store = get_quota_store()                   # process-wide; safe across asyncio.run() calls
    limits = await LimitsSource.shared().get("alpha")

See docs/quota.md.
"""

from __future__ import annotations

from .factory import build_quota_store, get_quota_store, snapshot_all_sync
from .source import LimitsSource, UnknownProvider, reset_quota_store

__all__ = [
    "LimitsSource",
    "UnknownProvider",
    "build_quota_store",
    "get_quota_store",
    "reset_quota_store",
    "snapshot_all_sync",
]
