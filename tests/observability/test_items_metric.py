"""gateway_items_total counts final states only (docs/operations.md): an engine result ``released`` (not
sent, handed back to be queued again) is no final state and is not exported; the item counts once it
ends."""

from __future__ import annotations

from gateway_engine import ItemResult
from observability import metrics
from observability.engine import FINAL_ITEM_STATUSES, GatewayObserver


def _count(status: str) -> float:
    return sum(
        sample.value
        for family in metrics.items.collect()
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels == {"status": status, "lane": "batch"}
    )


def test_a_released_item_is_not_counted_and_its_final_state_is():
    observer = GatewayObserver("b-1", "acme")
    released, succeeded = _count("released"), _count("succeeded")
    observer.on_item_done(ItemResult("c1", "released"))
    assert _count("released") == released == 0
    observer.on_item_done(ItemResult("c1", "succeeded", provider="p", attempts=1))
    assert _count("succeeded") == succeeded + 1


def test_the_documented_statuses_are_the_exported_ones():
    text = open("docs/operations.md").read()
    row = next(line for line in text.splitlines() if line.startswith("| `gateway_items_total`"))
    assert all(status in row for status in FINAL_ITEM_STATUSES) and "released" in row
