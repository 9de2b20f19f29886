"""Rules written once (issue #20): an AST scan of the project's modules (tests and migrations excluded)
finds exactly one definition of the priority rank, ErrorType and the usage cost helper."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".venv", ".git", "tests", "migrations", "node_modules", "__pycache__", "bench"}
LANES = {"high", "normal", "low"}


def modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if SKIP_DIRS & set(rel.parts):
            continue
        out.append((rel.as_posix(), ast.parse(path.read_text(), filename=str(rel))))
    return out


def definitions(predicate) -> list[str]:
    return [f"{rel}:{node.lineno}" for rel, tree in modules() for node in ast.walk(tree) if predicate(node)]


def is_lane_rank(node: ast.AST) -> bool:
    """A mapping from the lanes to ranks (a dict literal keyed by the three lane names)."""
    if not isinstance(node, ast.Dict):
        return False
    keys = set()
    for key in node.keys:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.add(key.value)
        elif isinstance(key, ast.Attribute) and key.attr.lower() in LANES:  # BatchPriority.HIGH …
            keys.add(key.attr.lower())
    return keys == LANES


def test_the_priority_rank_is_defined_once():
    found = definitions(is_lane_rank)
    assert len(found) == 1 and found[0].startswith("batches/scheduling/fair.py:"), found


def test_error_type_is_defined_once():
    found = definitions(lambda node: isinstance(node, ast.ClassDef) and node.name == "ErrorType")
    assert len(found) == 1 and found[0].startswith("gateway_engine/"), found


def test_the_usage_cost_helper_is_defined_once():
    found = definitions(lambda node: isinstance(node, ast.FunctionDef) and node.name == "add_usage_costs")
    assert len(found) == 1 and found[0].startswith("providers/pricing.py:"), found
