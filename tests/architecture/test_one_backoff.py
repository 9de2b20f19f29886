"""One growth formula (issue "A home for each concept"): every "wait longer each time" of the product goes
through gateway_engine/backoff.py (``capped_exponential`` and its ladder). A doubling of its own — a
``x = min(x * 2, cap)``, an ``x *= 2``, a ``base * 2 ** n`` — anywhere else in the product fails here.
(The Lua side: tests/architecture/test_error_tables.py checks no engine script grows on its own.)"""

from __future__ import annotations

import ast

import pytest

from .imports import ROOT
from .scan import PRODUCT, project_files

HOME = ROOT / "gateway_engine" / "backoff.py"
# the client library ships on its own (client/pyproject.toml) and imports nothing of the server's: its
# retry and poll waits are its own
SCANNED = tuple(top for top in PRODUCT if not top.startswith("client/"))


def _is_growth_factor(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and node.value > 1


def _scales_itself(value: ast.AST, name: str) -> bool:
    """``name * k`` (or ``k * name``), k > 1, somewhere inside ``value``."""
    for node in ast.walk(value):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            sides = (node.left, node.right)
            if any(isinstance(s, ast.Name) and s.id == name for s in sides) and any(
                map(_is_growth_factor, sides)
            ):
                return True
    return False


def own_growth(tree: ast.AST) -> list[int]:
    """Line numbers of home-grown exponential growth in ``tree``."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Mult)
            and _is_growth_factor(node.value)
        ):
            found.append(node.lineno)
        elif (
            isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        ):
            if _scales_itself(node.value, node.targets[0].id):
                found.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            # base * 2 ** n: a power of a constant to a varying exponent, scaled (2**64 is a constant)
            for side in (node.left, node.right):
                if (
                    isinstance(side, ast.BinOp)
                    and isinstance(side.op, ast.Pow)
                    and _is_growth_factor(side.left)
                    and not isinstance(side.right, ast.Constant)
                ):
                    found.append(node.lineno)
    return sorted(found)


def test_no_growth_formula_outside_backoff():
    found = []
    for path in project_files(*SCANNED):
        if path == HOME:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}" for line in own_growth(ast.parse(path.read_text()))]
    assert found == [], "grow waits through gateway_engine/backoff.py (capped_exponential): " + ", ".join(
        found
    )


@pytest.mark.parametrize(
    "source",
    [
        "delay = min(delay * 2, 0.1)\n",  # the lease poll's loop before this guard
        "delay = min(2 * delay, cap)\n",
        "wait *= 2\n",
        "t = base * 2 ** attempt\n",
        "t = min(cap, base * 2.0 ** n)\n",
    ],
)
def test_the_scan_catches_a_doubling_of_its_own(source):
    assert own_growth(ast.parse(source)) == [1]


@pytest.mark.parametrize(
    "source",
    [
        "x = y * 2\n",
        "total = total + 2\n",
        "area = side ** 2\n",
        "half = n * 0.5\n",
        "n *= 1\n",
        "m = 2**64\n",
        "magnitude = 10 ** (len(digits) - 1)\n",
    ],
)
def test_the_scan_leaves_other_arithmetic_alone(source):
    assert own_growth(ast.parse(source)) == []
