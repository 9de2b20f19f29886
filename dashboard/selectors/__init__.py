"""Read-side queries for the dashboards, one module per page.

    history         the batches page: filtered list, each batch's summary from its Batch row
    batch_detail    the batch page: retry origin, latency/progress charts, per-provider log, items
    error_classes   error classes as SQL (from the engine's table), for the batch page and failures
    failures        the failures browser: failed items grouped by provider × class and status code
    providers       the providers page: safe config views, recent activity
    capacity        the providers page's capacity advisor (observed p50 → batches.scheduling.capacity)
    queues          queued items by provider/team/lane; a batch's place (batches.scheduling.place)
    usage           the usage audit page and CSV, with costs (providers.pricing.add_usage_costs)

Every function issues a small, fixed number of queries whatever the batch size: lists read the Batch
counters and TeamUsageDaily; per-batch numbers come from Batch.stats plus one GROUP BY over the batch's
items (index batchitem_batch_status); failure lists read the partial index on failed items. Large JSON
columns (payload, response, attempt_log) are never loaded in lists. Whether a batch can still be
cancelled is the execution layer's rule (batches.execution.cancellable).
"""
