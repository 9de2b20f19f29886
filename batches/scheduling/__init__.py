"""Pure scheduling rules (no Django, no I/O): fair queuing over teams, lane order with aging, slice sizing.

The dispatcher (batches.execution.dispatcher) feeds these functions with rows it read from the database
and virtual times it keeps in Redis (or in-process); everything here is deterministic given its inputs,
so it is unit-tested with a fake clock (tests/scheduling/test_fair_unit.py).

    fair        start-time fair queuing over teams, lane order (LANE_RANK, the one priority rank), sizing
    place       a batch's place in the provider queues and its ETA, from the same rules
    capacity    the capacity advisor's rule (max_concurrency ≈ p50 latency × RPM / 60 × 1.2)
"""

from .fair import (
    LANE_RANK,
    BatchCandidate,
    FairState,
    SfqPick,
    batch_order_key,
    buffer_target,
    charge,
    effective_lane,
    order_batches,
    pick_team,
    quantum,
)

__all__ = [
    "LANE_RANK",
    "BatchCandidate",
    "FairState",
    "SfqPick",
    "batch_order_key",
    "buffer_target",
    "charge",
    "effective_lane",
    "order_batches",
    "pick_team",
    "quantum",
]
