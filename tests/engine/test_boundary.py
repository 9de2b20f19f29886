"""The engine package (gateway_engine) is Django-free: it imports nothing of Django or of the project's
Django apps, so it runs (and is tested, typed and benchmarked) as plain Python. Its Django side lives in
providers/adapters.py, providers/limits/ and providers/shared_breaker.py."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENGINE = ROOT / "gateway_engine"
FORBIDDEN = (
    "django",
    "rest_framework",
    "celery",
    "providers",
    "batches",
    "dashboard",
    "openai_api",
    "observability",
    "audit",
    "gateway_site",
)


def imported_modules(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every absolute module a file imports, anywhere in it (functions included), with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def forbidden_imports(root: pathlib.Path) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        for line, module in imported_modules(path):
            if module.split(".")[0] in FORBIDDEN:
                bad.append(f"{path.relative_to(root.parent)}:{line} imports {module}")
    return bad


def test_engine_imports_nothing_of_django_or_the_apps():
    assert forbidden_imports(ENGINE) == []


def test_the_check_catches_an_import_inside_a_function(tmp_path):
    pkg = tmp_path / "gateway_engine"
    pkg.mkdir()
    (pkg / "ok.py").write_text("import asyncio\nfrom .quota import types\n")
    (pkg / "bad.py").write_text("def f():\n    from django.conf import settings\n    return settings\n")
    (pkg / "bad2.py").write_text("import providers.models as m\n")
    assert forbidden_imports(pkg) == [
        "gateway_engine/bad.py:2 imports django.conf",
        "gateway_engine/bad2.py:1 imports providers.models",
    ]


@pytest.mark.parametrize("module", ["gateway_engine", "gateway_engine.quota", "gateway_engine.batcher"])
def test_engine_imports_in_a_fresh_interpreter_without_django(module):
    """Importing the engine loads no Django module (no settings needed at all)."""
    code = (
        f"import sys, {module}\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'django', 'providers', 'batches', 'celery'})\n"
        "print(bad); sys.exit(1 if bad else 0)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
