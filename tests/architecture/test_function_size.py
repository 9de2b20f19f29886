"""No function of the product (``scan.PRODUCT``: the engine, the Django apps, gateway_site with its
settings, the simulator, the client library) is longer than MAX_LINES lines (issues #14, #37).

Counted from its first decorator (or ``def``) to its last line, docstring and comments included; a
nested function counts on its own and inside its parent. A long function is split into small ones
that each do one job."""

from __future__ import annotations

import ast
import pathlib

from .imports import ROOT
from .scan import PRODUCT, functions, lines_of, project_files

MAX_LINES = 60


def function_lengths(paths, base: pathlib.Path = ROOT) -> list[tuple[int, str]]:
    """(lines, "path:line qualified.name") for every function and method in ``paths``, longest first."""
    found: list[tuple[int, str]] = []
    for path in paths:
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(base)
        found += [(lines_of(node), f"{where}:{node.lineno} {name}") for name, node in functions(tree)]
    return sorted(found, key=lambda row: (-row[0], row[1]))


def too_long(rows: list[tuple[int, str]]) -> list[str]:
    return [f"{name}: {lines} lines" for lines, name in rows if lines > MAX_LINES]


def test_no_function_is_longer_than_the_limit():
    offenders = too_long(function_lengths(project_files(*PRODUCT)))
    assert offenders == [], f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(offenders)


def test_the_count_finds_long_methods_nested_functions_and_decorators(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "m.py").write_text(
        "import functools\n\n"
        f"class C:\n    @functools.cache\n    def long(self):\n{body.replace('    ', '        ')}\n\n"
        f"def short():\n    return 1\n\n"
        f"async def outer():\n    async def inner():\n{body.replace('    ', '        ')}\n    return inner\n"
    )
    rows = function_lengths([tmp_path / "m.py"], base=tmp_path)
    assert rows[0] == (64, "m.py:71 outer")
    assert (63, "m.py:5 C.long") in rows  # from the decorator on line 4
    assert (62, "m.py:72 outer.inner") in rows
    assert (2, "m.py:68 short") in rows
    assert too_long(rows) == [
        "m.py:71 outer: 64 lines",
        "m.py:5 C.long: 63 lines",
        "m.py:72 outer.inner: 62 lines",
    ]


def test_the_limit_is_60_lines_inclusive(tmp_path):
    for n in (60, 61):  # a def line and n - 1 body lines
        (tmp_path / f"f{n}.py").write_text("def f():\n" + "    x = 1\n" * (n - 1))
    rows = function_lengths(sorted(tmp_path.glob("*.py")), base=tmp_path)
    assert too_long(rows) == ["f61.py:1 f: 61 lines"]


def test_the_scan_covers_every_part_of_the_product():
    """A long function in a view, the simulator, the client or the settings package is found like one
    in the engine (each of these directories is in ``PRODUCT``)."""
    scanned = {p.relative_to(ROOT).parts[0] for p in project_files(*PRODUCT)}
    assert {"gateway_engine", "batches", "providers", "sim", "client", "gateway_site"} <= scanned
    names = {name for _, name in function_lengths(project_files("gateway_site/settings", "sim", "client"))}
    assert any(n.startswith("sim/server.py:") for n in names)
    assert any(n.startswith("client/batch_gateway_client/client.py:") for n in names)
