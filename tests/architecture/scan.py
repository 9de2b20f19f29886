"""AST scans of the project's own code: sizes of modules, classes and functions, and private reads."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from .imports import ROOT, python_files

# the product: every package that runs in production or ships (the engine, the Django apps, the site
# package with its settings, the simulator, the client library, the web server's config); bench/,
# scripts/ and tests/ are tools around it
PRODUCT = (
    "gateway_engine",
    "teams",
    "providers",
    "response_cache",
    "batches",
    "interactive",
    "webhooks",
    "provider_batches",
    "openai_api",
    "dashboard",
    "observability",
    "audit",
    "gateway_site",
    "sim",
    "client/batch_gateway_client",
    "gunicorn.conf.py",
    "manage.py",
)

# public by contract although underscored: Django's model options, namedtuple's API, os._exit
PUBLIC_UNDERSCORED = {"_meta", "_replace", "_asdict", "_fields", "_make", "_exit", "_getframe"}


def lines_of(node: ast.AST) -> int:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])  # type: ignore[attr-defined]
    return node.end_lineno - start + 1  # type: ignore[attr-defined]


def functions(
    node: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method under ``node`` with its qualified name (``Class.method``,
    ``outer.inner``); a nested function is yielded on its own and counts inside its parent too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{child.name}", child
            yield from functions(child, f"{prefix}{child.name}.")
        elif isinstance(child, ast.ClassDef):
            yield from functions(child, f"{prefix}{child.name}.")
        else:
            yield from functions(child, prefix)


def classes(tree: ast.AST) -> Iterator[ast.ClassDef]:
    yield from (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))


def private_reads(tree: ast.AST) -> Iterator[ast.Attribute]:
    """``x._name`` where ``x`` is not ``self``/``cls``/``super()`` (and ``_name`` is not a dunder)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name in PUBLIC_UNDERSCORED:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
            continue
        if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super":
            continue
        yield node


def project_files(*tops: str) -> Iterator[Path]:
    yield from python_files(*(t for t in tops if (ROOT / t).exists()))
