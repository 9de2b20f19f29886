"""The Django side of the quota engine (gateway_engine.quota): the process-wide store chosen by settings,
and the live limits read from the database (providers and teams), reloaded on every config change.

    from providers.quota import get_quota_store, LimitsSource

    store = get_quota_store()                   # process-wide; safe across asyncio.run() calls
    limits = await LimitsSource.shared().get("alpha")

See docs/quota.md.
"""

from __future__ import annotations

from .config import LimitsSource, UnknownProvider
from .factory import build_quota_store, get_quota_store, reset_quota_store, snapshot_all_sync

__all__ = [
    "LimitsSource",
    "UnknownProvider",
    "build_quota_store",
    "get_quota_store",
    "reset_quota_store",
    "snapshot_all_sync",
]
