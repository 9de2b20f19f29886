"""No function in the engine package (gateway_engine/) is longer than MAX_LINES lines.

Counted from its first decorator (or ``def``) to its last line, docstring and comments included; a
nested function counts on its own and inside its parent. A long function is split into small ones
that each do one job (issue #14)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENGINE = ROOT / "gateway_engine"
MAX_LINES = 60


def function_lengths(root: pathlib.Path) -> list[tuple[int, str]]:
    """(lines, "path:line qualified.name") for every function and method under ``root``, longest first."""
    found: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(root.parent)
        found += _walk(tree, where, "")
    return sorted(found, key=lambda row: (-row[0], row[1]))


def _walk(node: ast.AST, where: pathlib.Path, prefix: str) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([child.lineno] + [d.lineno for d in child.decorator_list])
            assert child.end_lineno is not None
            found.append((child.end_lineno - first + 1, f"{where}:{child.lineno} {prefix}{child.name}"))
            found += _walk(child, where, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            found += _walk(child, where, f"{prefix}{child.name}.")
        else:
            found += _walk(child, where, prefix)
    return found


def test_no_engine_function_is_longer_than_the_limit():
    offenders = [f"{name}: {lines} lines" for lines, name in function_lengths(ENGINE) if lines > MAX_LINES]
    assert offenders == [], f"functions over {MAX_LINES} lines (split them):\n" + "\n".join(offenders)


def test_the_count_finds_long_methods_nested_functions_and_decorators(tmp_path):
    pkg = tmp_path / "gateway_engine"
    pkg.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (pkg / "m.py").write_text(
        "import functools\n\n"
        f"class C:\n    @functools.cache\n    def long(self):\n{body.replace('    ', '        ')}\n\n"
        f"def short():\n    return 1\n\n"
        f"async def outer():\n    async def inner():\n{body.replace('    ', '        ')}\n    return inner\n"
    )
    rows = function_lengths(pkg)
    assert rows[0] == (64, "gateway_engine/m.py:71 outer")
    assert (63, "gateway_engine/m.py:5 C.long") in rows  # from the decorator on line 4
    assert (62, "gateway_engine/m.py:72 outer.inner") in rows
    assert (2, "gateway_engine/m.py:68 short") in rows
    assert [name for lines, name in rows if lines > MAX_LINES] == [
        "gateway_engine/m.py:71 outer",
        "gateway_engine/m.py:5 C.long",
        "gateway_engine/m.py:72 outer.inner",
    ]
