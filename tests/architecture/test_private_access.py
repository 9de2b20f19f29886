"""No module reads another object's underscore attributes (issue #20): ``x._name`` only where ``x`` is
``self``, ``cls`` or ``super()``. That also rules out the owner-reference pattern (a part keeping
``self.owner`` to call ``self.owner._private()``), which is how ``_Run``/``_Queues`` reached back into
the batcher. A few underscored names are public by contract (Django's ``_meta``, namedtuple's
``_replace``/``_asdict``, ``os._exit``): tests/architecture/scan.py lists them."""

from __future__ import annotations

import ast

import pytest

from .imports import ROOT
from .scan import private_reads, project_files

TOPS = ("gateway_engine", "teams", "providers", "batches", "openai_api", "dashboard", "observability",
        "audit", "gateway_site", "sim")  # fmt: skip


def reads(source: str) -> list[str]:
    return [ast.unparse(node) for node in private_reads(ast.parse(source))]


def test_no_module_reads_another_objects_private_attributes():
    found = []
    for path in project_files(*TOPS):
        for node in private_reads(ast.parse(path.read_text())):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "class Part:\n    def go(self):\n        return self.owner._run_one()\n",  # the owner-reference
        "def f(request):\n    return request._request\n",
        "import mod\nmod._helper()\n",
    ],
)
def test_the_scan_catches_a_private_read(source):
    assert reads(source)


def test_own_and_public_underscored_names_pass():
    source = (
        "class A(B):\n"
        "    def f(self):\n"
        "        self._x = 1\n"
        "        super()._g()\n"
        "        return type(self)._meta, row._asdict(), point._replace(x=1), self.__class__\n"
        "    @classmethod\n"
        "    def h(cls):\n"
        "        return cls._registry\n"
    )
    assert reads(source) == []
