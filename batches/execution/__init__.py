"""Execution services: how stored batches become provider calls and results.

    claims      claim / renew / release items, requeue dead workers' claims, end unsent items in bulk
    apply       the one result writer (apply_results): owned rows, then budget, metrics and finalize
                for items served outside the engine (served.py: ServedBy, Served)
    results     its rows: finished items in bulk (owned rows only) with the batch counters
    runner      the thread bridge to the async engine (EngineThread)
    dispatcher  time-bounded slices: fair, provider-aware claiming into one streaming engine run
    finalize    finalize exactly once, progress snapshots, cancel (and whether a cancel changes anything)
    reaper      the reconciler thread (dead claims, overdue batches, dispatchers alive, due work)
    due         due-work queues (rows with a due_at) other apps register; the reconciler kicks them

The async engine (gateway_engine) never touches the ORM; the pure scheduling rules are in
batches.scheduling.
"""

from . import shutdown
from .apply import Applied, apply_result, apply_results
from .claims import (
    cancel_claimable,
    claim_queued,
    expire_unsent,
    release_claims,
    renew_claims,
    requeue_expired_claims,
)
from .common import ENGINE_TO_ITEM_STATUS, OPEN_ITEM_STATUSES, claim_lease, new_owner, ride_through, worker_id
from .dispatcher import DispatchSlice
from .engine_wiring import build_batcher, engine_options, load_routing_table, work_item
from .finalize import batch_stats, cancel_batch, cancellable, finalize_batch_if_done, snapshot_progress
from .keepalive import DispatcherSet, ensure_local_dispatcher, run_dispatcher_task, start_batch
from .queued import queued_work, work_remains
from .reaper import Reaper, reconcile
from .results import WRITE_BATCH_ROWS
from .runner import EngineThread
from .served import Served, ServedBy, as_served

__all__ = [
    "ENGINE_TO_ITEM_STATUS",
    "OPEN_ITEM_STATUSES",
    "WRITE_BATCH_ROWS",
    "Applied",
    "DispatchSlice",
    "DispatcherSet",
    "EngineThread",
    "Reaper",
    "Served",
    "ServedBy",
    "apply_result",
    "apply_results",
    "as_served",
    "batch_stats",
    "build_batcher",
    "cancel_batch",
    "cancellable",
    "cancel_claimable",
    "claim_lease",
    "claim_queued",
    "engine_options",
    "ensure_local_dispatcher",
    "expire_unsent",
    "finalize_batch_if_done",
    "load_routing_table",
    "new_owner",
    "queued_work",
    "reconcile",
    "release_claims",
    "renew_claims",
    "requeue_expired_claims",
    "ride_through",
    "run_dispatcher_task",
    "shutdown",
    "snapshot_progress",
    "start_batch",
    "work_item",
    "work_remains",
    "worker_id",
]
