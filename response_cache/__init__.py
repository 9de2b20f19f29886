"""The response cache and in-flight dedup (issue #25, docs/cache.md).

    keys        the cache key (SHA-256 of canonical JSON) and the dedup key; pure
    policy      whether an item is cached / deduplicated (batch ``cache`` > route ``cache`` > off)
    models      CacheEntry (the stored answers, size-bounded) and InFlight (dedup leaders)
    selectors   live entries by key, leaders still in flight
    services    store (+ eviction to GATEWAY_CACHE_MAX_BYTES), clear a team, purge, lead / release
    retention   the purger observability.retention lists (purge_old_data)

It sits between ``providers`` and ``batches`` in the import layers (tests/architecture/test_layers.py):
batches' execution calls it (batches.execution.cache_stage); it imports nothing of batches.
"""
