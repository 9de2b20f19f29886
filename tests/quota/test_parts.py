"""The store's shape (docs/quota.md "Module map"): one abstract base per concern, each implemented by
both backends, composed into the public store; no ``NotImplementedError`` stub left in the package."""

from __future__ import annotations

import ast
import pathlib
from abc import ABC

import pytest

from gateway_engine.quota.buckets import TokenBuckets
from gateway_engine.quota.config_version import ConfigVersion
from gateway_engine.quota.leases import ConcurrencyLeases
from gateway_engine.quota.ledger import BudgetLedger
from gateway_engine.quota.slots import InFlightSlots

QUOTA = pathlib.Path(__file__).resolve().parents[2] / "gateway_engine" / "quota"
BASES = {
    "buckets": TokenBuckets,
    "lease_pool": ConcurrencyLeases,
    "ledger": BudgetLedger,
    "versions": ConfigVersion,
}


@pytest.mark.parametrize("base", list(BASES.values()), ids=list(BASES))
def test_each_concern_is_an_abstract_base(base):
    assert issubclass(base, ABC) and base.__abstractmethods__
    with pytest.raises(TypeError, match="abstract"):
        base()


def test_both_backends_compose_one_part_per_concern(store):
    prefix = {"local": "Local", "redis": "Redis"}[store.backend]
    for attr, base in BASES.items():
        part = getattr(store, attr)
        assert isinstance(part, base) and type(part).__name__.startswith(prefix), (attr, type(part))
    assert isinstance(store.slots, InFlightSlots)


def test_no_not_implemented_stub_in_the_package():
    found = []
    for path in sorted(QUOTA.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id == "NotImplementedError":
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
