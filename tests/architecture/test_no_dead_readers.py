"""Every public function of a read module (``selectors.py``, ``selectors/``) and of the interactive
lane's key cache has a caller somewhere in the project (code, tests, templates). A read nobody calls is
dead code that still has to be kept right when the models change (``response_cache.selectors.
team_summary`` and ``interactive.auth.forget_keys`` were such)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .imports import ROOT, python_files

TOPS = ("gateway_engine", "gateway_site", "teams", "providers", "response_cache", "batches", "interactive",
        "webhooks", "provider_batches", "openai_api", "dashboard", "observability", "audit", "tests")  # fmt: skip
EXTRA = ("interactive/auth.py",)


def _read_modules(files: list[Path]) -> list[Path]:
    extra = {ROOT / name for name in EXTRA}
    return [p for p in files if p.name == "selectors.py" or p.parent.name == "selectors" or p in extra]


def test_every_public_read_function_has_a_caller():
    files = list(python_files(*TOPS))
    texts = {path: path.read_text() for path in files if path != Path(__file__).resolve()}
    texts.update({p: p.read_text() for p in (ROOT / "templates").rglob("*.html")})
    uncalled = []
    for module in _read_modules(files):
        for node in ast.parse(texts[module]).body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("_"):
                continue
            word = re.compile(rf"\b{node.name}\b")
            uses = sum(len(word.findall(text)) for text in texts.values()) - 1  # minus its definition
            if uses == 0:
                uncalled.append(f"{module.relative_to(ROOT)}: {node.name}")
    assert uncalled == []
