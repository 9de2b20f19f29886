"""Team limits have one home (issue #37): every per-team limit is read through teams/limits.py, the
submission's rules live in batches/submission/, and no import circle — module-level or held together by
an import inside a function — runs through the modules that read or enforce a team's limits (the old
one: batches/queue_limits.py ↔ batches/submission/service.py).

Three scans (ast, no imports run):
* the import graph of the Django apps, module-level and function-local imports alike, has no strongly
  connected component holding a team-limit module;
* a team-limit module imports nothing of the project inside a function;
* a Team row's limit field (``team.max_stored_files``, ``obj.rpm_limit``, …) is read only in teams/.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

from .imports import ROOT, Import, imports_of, module_name, python_files

APPS = ["teams", "providers", "response_cache", "batches", "interactive", "webhooks", "provider_batches",
        "openai_api", "dashboard"]  # fmt: skip
# the modules that read or enforce a team's limits
TEAM_LIMIT_MODULES = {
    "teams.limits",
    "teams.usage",
    "batches.submission.queue_limits",
    "batches.submission.budget",
    "batches.submission.service",
    "batches.selectors",
    "openai_api.files",
    "providers.limits.budgets",
}
LIMIT_FIELDS = {
    "max_pending_items", "max_open_batches", "max_submissions_per_minute", "max_stored_files",
    "max_stored_file_bytes", "daily_token_budget", "monthly_token_budget", "max_provider_share",
    "rpm_limit", "tpm_limit",
}  # fmt: skip
TEAM_NAMES = {"team", "obj", "instance"}  # what a Team row is called where one is read


def graph(files: dict[str, Iterable[Import]]) -> dict[str, set[str]]:
    """module -> the project modules it imports (module-level or inside a function). ``from pkg import
    mod`` counts as an import of pkg.mod, not of pkg (a package's __init__ re-exporting its modules is no
    circle); an import of the module's own package is dropped for the same reason."""
    known = set(files)
    edges: dict[str, set[str]] = {}
    for module, imports in files.items():
        targets = {i.target for i in imports}
        out = set()
        for target in targets:
            if target not in known or target == module or module.startswith(target + "."):
                continue
            if any(t.startswith(target + ".") and t in known for t in targets):
                continue  # `from pkg import mod`: the edge is to pkg.mod
            out.add(target)
        edges[module] = out
    return edges


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def project_imports(overrides: dict[str, str] | None = None) -> dict[str, list[Import]]:
    """Every app module's imports; ``overrides``: {relative path: source} to scan instead (self-tests)."""
    overrides = overrides or {}
    files = {}
    for path in python_files(*APPS):
        rel = path.relative_to(ROOT).as_posix()
        files[module_name(path)] = imports_of(path, overrides.pop(rel, None))
    for rel, source in overrides.items():  # a module the tree does not have (yet)
        path = ROOT / rel
        files[module_name(path)] = imports_of(path, source)
    return files


def team_limit_circles(files: dict[str, list[Import]]) -> list[list[str]]:
    return [sorted(c) for c in circles(graph(files)) if c & TEAM_LIMIT_MODULES]


def local_imports(files: dict[str, list[Import]]) -> list[str]:
    return sorted(
        f"{i.path.relative_to(ROOT)}:{i.line}: import {i.target} inside a function"
        for module in TEAM_LIMIT_MODULES
        for i in files.get(module, [])
        if i.local and i.target.split(".")[0] in {*APPS, "gateway_site"}
    )


def field_reads(path: Path, source: str | None = None) -> list[str]:
    tree = ast.parse(source if source is not None else path.read_text())
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or node.attr not in LIMIT_FIELDS:
            continue
        owner = node.value
        named = isinstance(owner, ast.Name) and owner.id in TEAM_NAMES
        if named or (isinstance(owner, ast.Attribute) and owner.attr == "team"):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: reads {ast.unparse(node)}")
    return found


def test_no_import_circle_runs_through_a_team_limit_module():
    assert team_limit_circles(project_imports()) == []


def test_team_limit_modules_import_nothing_inside_a_function():
    assert local_imports(project_imports()) == []


def test_a_team_rows_limit_fields_are_read_only_in_teams():
    found = [
        read
        for path in python_files(*[a for a in APPS if a != "teams"], "gateway_site")
        if "migrations" not in path.parts
        for read in field_reads(path)
    ]
    assert found == []


OLD_QUEUE_LIMITS = (
    "from teams.models import Team\n\ndef refusal(team):\n    from .submission import service\n"
)
OLD_SERVICE = "from batches import queue_limits\n"


@pytest.mark.parametrize(
    ("overrides", "broken"),
    [
        # the old circle, held together by an import inside a function
        ({"batches/queue_limits.py": OLD_QUEUE_LIMITS, "batches/submission/service.py": OLD_SERVICE}, "both"),
        # the same circle at module level
        ({"batches/submission/queue_limits.py": "from . import service\n"}, "circle"),
        # no circle, but a function-level import in a team-limit module
        ({"openai_api/files.py": "def quota():\n    from teams.limits import limits_of\n"}, "local"),
    ],
)
def test_the_scans_catch_a_broken_rule(overrides, broken):
    files = project_imports(dict(overrides))
    if "batches.queue_limits" in files:
        TEAM_LIMIT_MODULES.add("batches.queue_limits")
    try:
        found_circles, found_local = team_limit_circles(files), local_imports(files)
    finally:
        TEAM_LIMIT_MODULES.discard("batches.queue_limits")
    if broken in ("both", "circle"):
        assert found_circles, overrides
    if broken in ("both", "local"):
        assert found_local, overrides


def test_the_field_scan_catches_a_direct_read():
    source = "def f(team, batch):\n    return team.max_stored_files or batch.team.rpm_limit\n"
    assert len(field_reads(ROOT / "openai_api" / "x.py", source)) == 2
    assert field_reads(ROOT / "openai_api" / "x.py", "def f(limits):\n    return limits.rpm_limit\n") == []
