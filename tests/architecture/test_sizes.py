"""Modules and classes small enough to read in one sitting (issues #20, #37): every module of the
product (``scan.PRODUCT``: the engine, the Django apps, gateway_site with its settings, the simulator,
the client library; migrations excluded) at most 400 lines, every class at most 250.
Functions: tests/architecture/test_function_size.py (60 lines, the same product)."""

from __future__ import annotations

import ast

import pytest

from .imports import ROOT
from .scan import PRODUCT, classes, lines_of, project_files

MAX_MODULE_LINES = 400
MAX_CLASS_LINES = 250


def too_long_modules(paths, base=ROOT) -> list[str]:
    out = []
    for path in paths:
        n = len(path.read_text().splitlines())
        if n > MAX_MODULE_LINES:
            out.append(f"{path.relative_to(base)}: {n} lines (at most {MAX_MODULE_LINES})")
    return out


def too_long_classes(tree: ast.AST, where: str) -> list[str]:
    return [
        f"{where}: class {c.name} is {lines_of(c)} lines (at most {MAX_CLASS_LINES})"
        for c in classes(tree)
        if lines_of(c) > MAX_CLASS_LINES
    ]


def test_no_module_over_400_lines():
    assert too_long_modules(project_files(*PRODUCT)) == []


def test_no_class_over_250_lines():
    found = []
    for path in project_files(*PRODUCT):
        found += too_long_classes(ast.parse(path.read_text()), str(path.relative_to(ROOT)))
    assert found == []


def test_the_scan_covers_the_whole_product():
    """The settings, the simulator, the client and the site package are scanned like the apps."""
    scanned = {str(p.relative_to(ROOT)) for p in project_files(*PRODUCT)}
    expected = {
        "gateway_site/settings/base.py",
        "gateway_site/urls.py",
        "sim/server.py",
        "client/batch_gateway_client/client.py",
        "gateway_engine/batcher.py",
        "batches/execution/dispatcher.py",
        "gunicorn.conf.py",
    }
    assert expected <= scanned
    assert not any("/migrations/" in p for p in scanned)


@pytest.mark.parametrize("body_lines", [249, 251])
def test_the_class_scan_counts_every_line(body_lines):
    source = "class Big:\n" + "    x = 1\n" * (body_lines - 1)
    found = too_long_classes(ast.parse(source), "x.py")
    assert bool(found) == (body_lines > MAX_CLASS_LINES), found


def test_the_module_scan_catches_a_long_module(tmp_path):
    (tmp_path / "long.py").write_text("x = 1\n" * 401)
    (tmp_path / "short.py").write_text("x = 1\n" * 400)
    found = too_long_modules(sorted(tmp_path.glob("*.py")), base=tmp_path)
    assert [line.split(":")[0] for line in found] == ["long.py"]
