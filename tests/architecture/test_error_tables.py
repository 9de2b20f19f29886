"""One row per error type (gateway_engine/error_kinds.py ``ERROR_KINDS``; docs/architecture.md "Error
types: one row each"):

* every error type has a row and every column of it is filled with a value its readers know (a class
  of ``ERROR_CLASSES``, a policy of ``BACKOFF_POLICIES`` that retries exactly when the row does, an
  item status, an HTTP error status, an OpenAI error type, the codes);
* no module beside the table keeps a side table of error types: a dict keyed by error types, a literal
  set/list/tuple of several, or a conditional turning an error type into a surface's answer (an OpenAI
  type or an HTTP status) — an AST scan of the project (tests, migrations, the simulator and the
  client excluded);
* no Lua script of the engine grows a wait by a formula of its own (the breaker's cooldown ladder is
  computed in Python and passed in).

Each rule is shown to fail on a broken input below (``test_the_*_sees_*``)."""

from __future__ import annotations

import ast
import dataclasses
import re

import pytest

from gateway_engine import breaker_redis
from gateway_engine.backoff import BACKOFF_POLICIES, NEVER, STANDARD
from gateway_engine.error_kinds import (
    CLASS_OTHER,
    ERROR_CLASSES,
    ERROR_KINDS,
    ERROR_TYPES,
    ITEM_STATUSES,
    ErrorKind,
)
from gateway_engine.error_types import ErrorType

from .test_defined_once import modules

NAMES = tuple(v for k, v in vars(ErrorType).items() if k.isupper())
CLASS_KEYS = {c.key for c in ERROR_CLASSES} | {CLASS_OTHER}
OPENAI_TYPES = {"invalid_request_error", "rate_limit_error", "insufficient_quota", "server_error"}
OPTIONAL = {"param"}  # the one column a row may leave empty (most errors are about no request field)


# ---- every error type has a complete row -------------------------------------------------------------


def row_problems(row: ErrorKind) -> list[str]:
    """What is missing or unknown in one row."""
    refusal = row.name not in NAMES
    problems = [
        f"{row.name}: {f.name} is empty"
        for f in dataclasses.fields(row)
        if f.name not in OPTIONAL
        and not (refusal and f.name == "line_code")
        and getattr(row, f.name) in (None, "")
    ]
    if row.error_class not in CLASS_KEYS:
        problems.append(f"{row.name}: class {row.error_class!r} is not one of ERROR_CLASSES")
    policy = BACKOFF_POLICIES.get(row.backoff)
    if policy is None:
        problems.append(f"{row.name}: backoff {row.backoff!r} is not one of BACKOFF_POLICIES")
    elif policy.retries != row.retryable:
        problems.append(f"{row.name}: retryable={row.retryable} but backoff {row.backoff!r}")
    if row.breaker_failure and not row.retryable:
        problems.append(f"{row.name}: a breaker failure that is never retried")
    if row.item_status not in ITEM_STATUSES:
        problems.append(f"{row.name}: item status {row.item_status!r} is not one of {ITEM_STATUSES}")
    if not 400 <= row.status < 600:
        problems.append(f"{row.name}: status {row.status} is not an HTTP error")
    if row.openai_type not in OPENAI_TYPES:
        problems.append(f"{row.name}: OpenAI type {row.openai_type!r} unknown")
    if refusal and row.line_code is not None:
        problems.append(f"{row.name}: an interactive refusal with a /v1 line code")
    return problems


def table_problems(kinds: dict[str, ErrorKind]) -> list[str]:
    problems = [f"{name}: no row" for name in NAMES if name not in kinds]
    problems += [f"{key}: row named {row.name!r}" for key, row in kinds.items() if row.name != key]
    return problems + [p for row in kinds.values() for p in row_problems(row)]


def test_every_error_type_has_a_complete_row():
    assert table_problems(ERROR_KINDS) == []
    assert ERROR_TYPES == NAMES  # the rows a batch item can end with, in ErrorType's order (the choices)


def test_every_class_and_policy_is_read():
    used = {row.error_class for row in ERROR_KINDS.values()}
    assert {c.key for c in ERROR_CLASSES if c.status_from is None} <= used  # a type-only class has rows
    assert {row.backoff for row in ERROR_KINDS.values()} == set(BACKOFF_POLICIES)


def _broken(name: str, **change: object) -> dict[str, ErrorKind]:
    kinds = dict(ERROR_KINDS)
    kinds[name] = dataclasses.replace(kinds[name], **change)  # type: ignore[arg-type]
    return kinds


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        ({k: v for k, v in ERROR_KINDS.items() if k != ErrorType.OVERLOADED}, "overloaded: no row"),
        (_broken(ErrorType.TIMEOUT, backoff=""), "timeout: backoff is empty"),
        (_broken(ErrorType.TIMEOUT, backoff="slow"), "timeout: backoff 'slow' is not one of"),
        (_broken(ErrorType.TIMEOUT, backoff=NEVER), "timeout: retryable=True but backoff 'never'"),
        (_broken(ErrorType.CLIENT_ERROR, backoff=STANDARD), "client_error: retryable=False but"),
        (_broken(ErrorType.CLIENT_ERROR, breaker_failure=True), "client_error: a breaker failure that"),
        (_broken(ErrorType.SERVER_ERROR, error_class="5xxx"), "server_error: class '5xxx' is not"),
        (_broken(ErrorType.SERVER_ERROR, item_status="lost"), "server_error: item status 'lost'"),
        (_broken(ErrorType.SERVER_ERROR, status=200), "server_error: status 200 is not"),
        (_broken(ErrorType.SERVER_ERROR, openai_type="api_error"), "server_error: OpenAI type"),
        (_broken(ErrorType.SERVER_ERROR, line_code=None), "server_error: line_code is empty"),
        (_broken(ErrorType.SERVER_ERROR, code=""), "server_error: code is empty"),
        (_broken("team_waiting_limit", line_code="x"), "team_waiting_limit: an interactive refusal"),
    ],
)
def test_the_completeness_check_sees_a_broken_table(kinds, expected):
    problems = table_problems(kinds)
    assert any(p.startswith(expected) for p in problems), problems


# ---- no side tables ------------------------------------------------------------------------------------

# the table's own modules, and what imitates providers or is a package of its own
HOMES = ("gateway_engine/error_kinds.py", "gateway_engine/error_types.py")
OUTSIDE = ("sim/", "client/", "scripts/")
# names that are words of other concepts too (an item status, a settings key): only ``ErrorType.X``
# counts for them; every other error type or refusal name counts as a string too
AMBIGUOUS = {"cancelled", "expired", "timeout"}
STRINGS = (set(ERROR_KINDS) - AMBIGUOUS) | {row.code for row in ERROR_KINDS.values()} - AMBIGUOUS
ATTRS = {k for k in vars(ErrorType) if k.isupper()}


def is_error_type(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in STRINGS
    if isinstance(node, ast.Attribute) and node.attr in ATTRS:
        return ast.unparse(node.value).split(".")[-1] == "ErrorType"
    return False


def is_answer(node: ast.AST | None) -> bool:
    """An OpenAI error type or an HTTP error status: what a surface answers."""
    if not isinstance(node, ast.Constant):
        return False
    value = node.value
    return (isinstance(value, str) and value in OPENAI_TYPES) or (
        isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600
    )


def _mentions_error_type(node: ast.AST) -> bool:
    return any(is_error_type(n) for n in ast.walk(node))


def _branch_answers(nodes: list[ast.stmt]) -> bool:
    return any(is_answer(n.value) for stmt in nodes for n in ast.walk(stmt) if isinstance(n, ast.Return))


def side_table(node: ast.AST) -> str | None:
    """Why ``node`` is a side table of error types, or None."""
    if isinstance(node, ast.Dict) and any(is_error_type(k) for k in node.keys):
        return "a dict keyed by error types"
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("dict", "frozenset", "set"):
        if any(kw.arg in STRINGS for kw in node.keywords):
            return "a dict keyed by error types"
    if isinstance(node, ast.Set | ast.List | ast.Tuple) and sum(map(is_error_type, node.elts)) >= 2:
        return "a literal collection of error types"
    if isinstance(node, ast.IfExp) and _mentions_error_type(node.test):
        if is_answer(node.body) or is_answer(node.orelse):
            return "a conditional mapping an error type to an answer"
    if isinstance(node, ast.If) and _mentions_error_type(node.test):
        if _branch_answers(node.body):
            return "a branch mapping an error type to an answer"
    if isinstance(node, ast.match_case) and _mentions_error_type(node.pattern):
        if _branch_answers(node.body):
            return "a match case mapping an error type to an answer"
    return None


def side_tables(trees) -> list[str]:
    return [
        f"{rel}:{getattr(node, 'lineno', None) or node.pattern.lineno}: {why}"
        for rel, tree in trees
        if rel not in HOMES and not rel.startswith(OUTSIDE)
        for node in ast.walk(tree)
        if (why := side_table(node)) is not None
    ]


def test_no_module_keeps_a_side_table_of_error_types():
    assert side_tables(modules()) == []


@pytest.mark.parametrize(
    "source",
    [
        # provider_batches/lines.py had this: the item status of an error type
        'STATUS = {ErrorType.EXPIRED: "expired", ErrorType.CANCELLED: "cancelled"}.get(t, "failed")\n',
        # openai_api/conversion.py's codes before the table
        'CODES = {"rate_limited": "rate_limited", "overloaded": "overloaded"}\n',
        # retry.py / recording.py had these: retried, breaker failures
        "RETRYABLE = frozenset({ErrorType.SERVER_ERROR, ErrorType.TIMEOUT})\n",
        'FAILURES = ("server_error", "connection_error")\n',
        # interactive/streams.py had this: the stream error frame's type
        'def _type(t):\n    return "rate_limit_error" if t == "rate_limited" else "server_error"\n',
        "def status(t):\n    if t == retry.ErrorType.OVERLOADED:\n        return 503\n    return 500\n",
        'def code(t):\n    match t:\n        case "no_provider":\n            return 503\n',
        "STATUS = dict(rate_limited=429, overloaded=503)\n",
    ],
)
def test_the_scan_sees_a_side_table(source):
    assert side_tables([("interactive/copy.py", ast.parse(source))]) != []


@pytest.mark.parametrize(
    "source",
    [
        "if result.error_type == ErrorType.RATE_LIMITED:\n    penalize()\n",  # behaviour, not a table
        'NOT_FINISHED = {"pending": "not sent yet", "cancelled": "cancelled before it was sent"}\n',
        'OPTIONS = {"timeout": 5, "retries": 2}\n',  # "timeout" is a setting's name too
    ],
)
def test_the_scan_leaves_what_is_not_a_table(source):
    assert side_tables([("interactive/ok.py", ast.parse(source))]) == []


# ---- no Lua growth formula -----------------------------------------------------------------------------

_LUA_STRING = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def lua_growth(source: str) -> list[str]:
    """Exponential growth written in a Lua script (``math.pow``, ``^`` outside its string literals)."""
    code = _LUA_STRING.sub("''", source)
    return [line.strip() for line in code.splitlines() if "math.pow" in line or "^" in line]


def engine_lua_scripts() -> dict[str, str]:
    """Every Lua script held as a module-level string of the engine (they all call redis.call)."""
    found = {}
    for rel, tree in modules():
        if not rel.startswith("gateway_engine/"):
            continue
        for node in tree.body:
            value = getattr(node, "value", None)
            if (
                isinstance(value, ast.Constant)
                and isinstance(value.value, str)
                and "redis.call" in value.value
            ):
                found[f"{rel}:{node.lineno}"] = value.value
    return found


def test_no_engine_lua_script_grows_a_wait_by_its_own_formula():
    scripts = engine_lua_scripts()
    assert any(where.startswith("gateway_engine/breaker_redis.py") for where in scripts)
    assert {where: lua_growth(src) for where, src in scripts.items() if lua_growth(src)} == {}
    assert "ladder" in breaker_redis._LUA  # the cooldowns come in as the Python-computed ladder


def test_the_lua_check_sees_the_old_formula():
    old = "local cool = math.min(c_maxcool, c_cool * math.pow(2, math.max(0, opens - 1)))\n"
    assert lua_growth(old) and lua_growth("local cool = c_cool * 2 ^ opens\n")
    assert lua_growth("for s in string.gmatch(ARGV[6], '[^,]+') do end\n") == []
