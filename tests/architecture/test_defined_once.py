"""Rules written once (issue #20): an AST scan of the project's modules (tests and migrations excluded)
finds exactly one definition of the priority rank, ErrorType, the Redis-error tuple, the usage cost
helper, ``team_limits``, the item-shape rule and the preferred-provider draw."""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", ".git", "tests", "migrations", "node_modules", "__pycache__", "bench", "build", "var"}
LANES = {"high", "normal", "low"}


@functools.cache
def _project_modules() -> tuple[tuple[str, ast.Module], ...]:
    """Every project module, parsed once per run (the skipped directories are never walked: .venv
    alone holds tens of thousands of files)."""
    out = []
    for top, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(f for f in files if f.endswith(".py")):
            rel = (Path(top) / name).relative_to(ROOT)
            out.append((rel.as_posix(), ast.parse((ROOT / rel).read_text(), filename=str(rel))))
    return tuple(sorted(out, key=lambda pair: pair[0]))


def modules() -> list[tuple[str, ast.Module]]:
    return list(_project_modules())


def definitions(predicate, trees=None) -> list[str]:
    trees = modules() if trees is None else trees
    return [f"{rel}:{node.lineno}" for rel, tree in trees for node in ast.walk(tree) if predicate(node)]


def function(name: str):
    return lambda node: isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name


def assigned(name: str):
    def predicate(node: ast.AST) -> bool:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        return any(isinstance(t, ast.Name) and t.id == name for t in targets)

    return predicate


REDIS_CONNECTION = {"RedisConnectionError", "redis.exceptions.ConnectionError", "exceptions.ConnectionError"}
REDIS_TIMEOUT = {"RedisTimeoutError", "redis.exceptions.TimeoutError", "exceptions.TimeoutError"}


def is_redis_error_tuple(node: ast.AST) -> bool:
    """A tuple literal naming both of redis-py's connection and timeout errors (a second REDIS_ERRORS)."""
    if not isinstance(node, ast.Tuple):
        return False
    names = {ast.unparse(e) for e in node.elts}
    return bool(names & REDIS_CONNECTION) and bool(names & REDIS_TIMEOUT)


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


def is_exponential_growth(node: ast.AST) -> bool:
    """``x ** n`` with a variable exponent and a growth factor (not a power of ten: a chart's scale)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)):
        return False
    right = node.right.operand if isinstance(node.right, ast.UnaryOp) else node.right
    if isinstance(right, ast.Constant):
        return False
    return not (isinstance(node.left, ast.Constant) and node.left.value == 10)


def test_the_priority_rank_is_defined_once():
    found = definitions(is_lane_rank)
    assert len(found) == 1 and found[0].startswith("batches/scheduling/fair.py:"), found


def test_error_type_is_defined_once():
    found = definitions(lambda node: isinstance(node, ast.ClassDef) and node.name == "ErrorType")
    assert len(found) == 1 and found[0].startswith("gateway_engine/"), found


def test_the_usage_cost_helper_is_defined_once():
    found = definitions(lambda node: isinstance(node, ast.FunctionDef) and node.name == "add_usage_costs")
    assert len(found) == 1 and found[0].startswith("providers/pricing.py:"), found


def test_the_redis_error_tuple_is_defined_once():
    # (the assignment and its tuple literal are on one line: one definition)
    found = sorted(
        set(definitions(lambda node: assigned("REDIS_ERRORS")(node) or is_redis_error_tuple(node)))
    )
    assert len(found) == 1 and found[0].startswith("gateway_engine/redis_errors.py:"), found


def test_capped_exponential_growth_is_written_once():
    """The retry backoff, the breaker cooldown, webhook redelivery and the provider-batch poll interval
    all grow through gateway_engine/backoff.py (a copy each, four times, before). The Python client
    (client/, a package of its own that installs without the gateway) keeps its own retry backoff."""
    found = [d for d in definitions(is_exponential_growth) if not d.startswith("client/")]
    assert len(found) == 1 and found[0].startswith("gateway_engine/backoff.py:"), found


@pytest.mark.parametrize(
    ("name", "home"),
    [
        ("team_limits", "teams/limits.py:"),  # a Team row as the engine's TeamLimits
        ("check_item_shape", "gateway_engine/item_shape.py:"),  # the ITEM shape rule
        ("preferred_provider", "gateway_engine/routing.py:"),  # the preferred-provider draw
    ],
)
def test_each_rule_function_is_defined_once(name, home):
    found = definitions(function(name))
    assert len(found) == 1 and found[0].startswith(home), found


@pytest.mark.parametrize(
    ("predicate", "source"),
    [
        (function("team_limits"), "class Run:\n    async def team_limits(self, team):\n        ...\n"),
        (function("preferred_provider"), "def preferred_provider(table, item):\n    return ''\n"),
        (is_lane_rank, "RANK = {'high': 2, 'normal': 1, 'low': 0}\n"),
        (is_exponential_growth, "def wait(n):\n    return min(60, 0.5 * 2 ** n)\n"),
        (is_redis_error_tuple, "ERRORS = (RedisConnectionError, RedisTimeoutError, OSError)\n"),
        (assigned("REDIS_ERRORS"), "REDIS_ERRORS: tuple = ()\n"),
        (
            lambda node: isinstance(node, ast.ClassDef) and node.name == "ErrorType",
            "class ErrorType:\n    pass\n",
        ),
    ],
)
def test_the_scan_sees_a_second_definition(predicate, source):
    extra = [("elsewhere/copy.py", ast.parse(source))]
    assert definitions(predicate, modules() + extra) != definitions(predicate)
    assert any(d.startswith("elsewhere/copy.py:") for d in definitions(predicate, extra))
