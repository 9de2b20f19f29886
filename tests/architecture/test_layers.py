"""The import layers (issue #20). A module may import its own package and the layers below it, never
one above, never a neighbour on its own layer; function-local imports count the same (an import moved
into a function to dodge a circle still fails here).

    gateway_engine                   the Django-free core (tests/engine/test_boundary.py: no Django either)
    gateway_site helpers             env, forksafe, redis, security, commands, admin_tools, errors
    teams                            Team, API keys, budgets and limits
    providers                        providers, routes, live limits, breakers, prices
    response_cache                   the response cache and in-flight dedup (issue #25): keys, entries, leaders
    batches                          submission, scheduling, execution, results
    interactive | webhooks | provider_batches
                                     the interactive lane (/v1/chat/completions, /v1/models) on batches' rules;
                                     signed events when a batch ends (listens to batches.signals); the
                                     provider-batch route (issue #23) — neighbours, not importing each other
    openai_api | dashboard           the two surfaces built on batches (they do not import each other)
    observability | audit            may import any app below; nothing imports them but the site root
    gateway_site (root)              settings, urls, wsgi/asgi, celery app, host middleware: anything

``sim`` (the provider simulator) imports nothing of the project. tests/, bench/, scripts/ and examples/
may import anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .imports import ROOT, Import, imports_of, module_name, python_files

SITE_HELPERS = {"admin_tools", "commands", "env", "errors", "forksafe", "redis", "security"}
LAYERS: list[set[str]] = [
    {"gateway_engine"},
    {"gateway_site.helpers"},
    {"teams"},
    {"providers"},
    {"response_cache"},
    {"batches"},
    {"interactive", "webhooks", "provider_batches"},
    {"openai_api", "dashboard"},
    {"observability", "audit"},
    {"gateway_site"},
]
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}
CHECKED = ["gateway_engine", "gateway_site", "teams", "providers", "response_cache", "batches", "interactive", "webhooks",
           "provider_batches",
           "openai_api", "dashboard", "observability", "audit"]  # fmt: skip


def unit_of(module: str) -> str | None:
    """The layer unit a dotted module belongs to (None: not the project's, e.g. django, redis)."""
    parts = module.split(".")
    if parts[0] == "gateway_site" and len(parts) > 1 and parts[1] in SITE_HELPERS:
        return "gateway_site.helpers"
    return parts[0] if parts[0] in RANK or parts[0] == "sim" else None


def violation(imp: Import) -> str | None:
    """Why ``imp`` breaks the layers, or None."""
    source, target = unit_of(module_name(imp.path)), unit_of(imp.target)
    if source is None or target is None or source == target:
        return None
    if source == "sim" or target == "sim":
        return f"{source} imports {target}: the simulator and the project do not import each other"
    if RANK[target] >= RANK[source] and source != "gateway_site":
        where = "upward" if RANK[target] > RANK[source] else "sideways"
        return f"{source} imports {target} ({where}; layers: tests/architecture/test_layers.py)"
    return None


def violations(paths) -> list[str]:
    found = []
    for path in paths:
        for imp in imports_of(path):
            why = violation(imp)
            if why:
                kind = "function-local " if imp.local else ""
                found.append(f"{imp.path.relative_to(ROOT)}:{imp.line}: {kind}import {imp.target}: {why}")
    return sorted(set(found))


def test_no_module_imports_upward_or_sideways():
    assert violations(p for top in CHECKED if (ROOT / top).exists() for p in python_files(top)) == []


def test_the_simulator_imports_nothing_of_the_project():
    assert violations(python_files("sim")) == []


@pytest.mark.parametrize(
    ("where", "source", "broken"),
    [
        ("providers/x.py", "import batches.models\n", "upward"),
        ("teams/x.py", "def f():\n    from providers.models import Provider\n", "function-local"),
        ("dashboard/x.py", "from openai_api import services\n", "sideways"),
        ("batches/x.py", "from observability import metrics\n", "upward"),
        ("gateway_site/redis.py", "import batches\n", "upward"),
        ("sim/x.py", "import gateway_engine\n", "simulator"),
        ("gateway_engine/x.py", "from .. import providers\n", "upward"),
    ],
)
def test_the_scan_catches_a_broken_rule(where, source, broken):
    path = ROOT / where
    found = [violation(imp) for imp in imports_of(path, source)]
    assert any(found), (where, source)
    if broken == "function-local":
        assert any(imp.local for imp in imports_of(path, source))
    else:
        assert any(broken in why for why in found if why), found


def test_allowed_imports_pass():
    for where, source in [
        (
            "batches/x.py",
            "from providers.models import Provider\nfrom gateway_site.forksafe import after_fork\n",
        ),
        ("observability/x.py", "from batches.models import Batch\nfrom dashboard import views\n"),
        ("gateway_site/urls.py", "import observability.views\n"),
        ("teams/x.py", "from gateway_engine.quota.team_quota import TeamLimits\nfrom .models import Team\n"),
    ]:
        assert [violation(i) for i in imports_of(Path(ROOT / where), source) if violation(i)] == [], where
