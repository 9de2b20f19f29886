"""Every import of the project's own packages, module-level and function-local, read with ``ast``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", "var", "node_modules", "migrations", "__pycache__", ".git"}


@dataclass(frozen=True)
class Import:
    path: Path  # the importing file
    line: int
    target: str  # dotted module imported (absolute)
    local: bool  # inside a function (not at module level)


def python_files(*tops: str) -> Iterator[Path]:
    for top in tops:
        base = ROOT / top
        if base.is_file():
            yield base
            continue
        for path in sorted(base.rglob("*.py")):
            if not SKIP_DIRS & set(path.relative_to(ROOT).parts):
                yield path


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _absolute(path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
    return ".".join([*base, node.module] if node.module else base)


def imports_of(path: Path, source: str | None = None) -> list[Import]:
    tree = ast.parse(source if source is not None else path.read_text(), filename=str(path))
    found: list[Import] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                found.extend(Import(path, child.lineno, a.name, local) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = _absolute(path, child)
                found.append(Import(path, child.lineno, base, local))
                # `from pkg import module` imports pkg.module too
                found.extend(
                    Import(path, child.lineno, f"{base}.{a.name}".lstrip("."), local) for a in child.names
                )
            visit(child, inner)

    visit(tree, False)
    return found
