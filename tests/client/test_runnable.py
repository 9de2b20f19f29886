"""``batch_gateway_client.langchain.GatewayRunnable`` against the real stack (tests/client/conftest.py):
``invoke`` through the interactive lane and ``batch`` of 100 as ONE gateway batch with the messages in
input order, from a process without Django; then, in this process, the asyncio twins, streaming, the
batch options passed through, and a failed item."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from batch_gateway_client import ItemFailedError
from batch_gateway_client.langchain import GatewayRunnable
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from packaging.requirements import Requirement

from batches.models import Batch, BatchItem

from .conftest import CLIENT_DIR, sim_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def client_requirements() -> list[Requirement]:
    """What ``pip install './client[langchain]'`` asks for: client/pyproject.toml's dependencies and
    its ``langchain`` extra."""
    project = tomllib.loads((CLIENT_DIR / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["langchain"]]


def distributions(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """The installed distributions those requirements need, transitively (markers evaluated for this
    interpreter, each with the extras asked for), by normalized name."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(r, frozenset(r.extras)) for r in requirements]
    while todo:
        req, extras = todo.pop()
        name = req.name.lower().replace("_", "-").replace(".", "-")
        if name in found:
            continue
        dist = metadata.distribution(req.name)
        found[name] = dist
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in {"", *extras}):
                todo.append((sub, frozenset(sub.extras)))
    return found


def no_django_site(directory: Path) -> Path:
    """A directory holding (as symlinks into this venv) exactly the top-level modules and metadata of
    the client's dependency closure: httpx, langchain-core and what they need, and nothing else."""
    directory.mkdir()
    dists = distributions(client_requirements())
    assert "django" not in dists and "batch-gateway" not in dists, sorted(dists)
    for dist in dists.values():
        tops = {Path(str(f)).parts[0] for f in dist.files or () if not str(f).startswith("..")}
        for top in tops - {"__pycache__"}:
            target = Path(str(dist.locate_file(top)))
            link = directory / top
            if target.exists() and not link.exists():
                link.symlink_to(target)
    return directory


NO_DJANGO_APP = r"""
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
base, key = sys.argv[3], sys.argv[4]
try:
    import django  # noqa: F401
    django_importable = True
except ModuleNotFoundError:
    django_importable = False
import batch_gateway_client
from batch_gateway_client.langchain import GatewayRunnable
from langchain_core.messages import AIMessage

llm = GatewayRunnable(base, key, model="chat", max_tokens=3)
one = llm.invoke("hello")
# input i is 4*(i+1) characters: the simulator counts ceil(chars / 4) = i+1 prompt tokens
many = llm.batch(["x" * (4 * (i + 1)) for i in range(100)], config={"max_concurrency": 4})
print(json.dumps({
    "django_importable": django_importable,
    "django_loaded": any(m == "django" or m.startswith("django.") for m in sys.modules),
    "client_file": batch_gateway_client.__file__,
    "invoke": [type(one).__name__, one.content, one.usage_metadata["output_tokens"]],
    "batch": [[isinstance(m, AIMessage), m.usage_metadata["input_tokens"], m.response_metadata["custom_id"],
               bool(m.content)] for m in many],
}))
"""


def test_invoke_and_a_batch_of_100_from_a_process_without_django(
    stack, sim_server, make_provider, make_route, key, tmp_path
):
    """The app process runs ``python -I -S``: no site-packages at all (so neither Django nor this
    repository's packages nor the editable install of the client), no PYTHONPATH. Its sys.path is the
    standard library, client/ (the source pip installs) and one directory of symlinks to the installed
    distributions that client/pyproject.toml's requirements (httpx, the langchain extra) pull in,
    resolved from their metadata — Django is not among them, and the process checks that ``import
    django`` fails. Cheaper and sturdier on a clean clone than building a second venv from an index:
    it needs nothing but the test venv, and takes the time of one interpreter start."""
    sim, gpt = sim_provider(sim_server, make_provider)
    make_route("chat", gpt)
    site = no_django_site(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DJANGO"))}
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", NO_DJANGO_APP, str(CLIENT_DIR), str(site), stack.url, key()],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["django_importable"] is False and out["django_loaded"] is False
    assert out["client_file"].startswith(str(CLIENT_DIR))
    assert out["invoke"] == ["AIMessage", "[gpt] tok tok tok ", 3]
    assert out["batch"] == [[True, i + 1, str(i), True] for i in range(100)]  # input order
    # the batch was one gateway batch of 100 items; the provider saw 101 requests in all
    batch = Batch.objects.get()
    assert BatchItem.objects.filter(batch=batch, route="chat").count() == 100
    assert sum(sim.request_counts()["gpt"].values()) == 101


def test_the_asyncio_twins_streaming_options_and_a_failed_item(stack, sim_server, make_provider, key):
    # model names a provider (no route of that name): the items say provider, the calls model
    _, gpt = sim_provider(sim_server, make_provider, max_retries=0)
    llm = GatewayRunnable(stack.url, key(), model="gpt", max_tokens=2)

    answer = asyncio.run(llm.ainvoke([SystemMessage("be brief"), HumanMessage("hi")]))
    assert isinstance(answer, AIMessage) and answer.usage_metadata["output_tokens"] == 2
    assert answer.response_metadata["finish_reason"] == "length"

    chunks = list(llm.stream("hi", max_tokens=3))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    whole = sum(chunks[1:], chunks[0])
    assert whole.content == "[gpt] tok tok tok " and whole.usage_metadata["output_tokens"] == 3

    async def astreamed() -> list[AIMessageChunk]:
        return [chunk async for chunk in llm.astream("hi")]

    achunks = asyncio.run(astreamed())
    assert sum(achunks[1:], achunks[0]).content == "[gpt] tok tok "

    # one item fails at the provider ([[sim:fault:server_error]], no retries): in its place with
    # return_exceptions, the others answered; priority reaches the batch, unset options stay unsent
    inputs = ["a", "b [[sim:fault:server_error]]", ("human", "c")]
    low = llm.bind(priority="low")
    out = asyncio.run(low.abatch(inputs, return_exceptions=True))
    assert isinstance(out[0], AIMessage) and isinstance(out[2], AIMessage)
    assert isinstance(out[1], ItemFailedError) and out[1].type == "server_error"
    batch = Batch.objects.get()
    assert batch.priority == "low"
    assert set(BatchItem.objects.filter(batch=batch).values_list("requested_provider", flat=True)) == {"gpt"}
    with pytest.raises(ItemFailedError):
        llm.batch(inputs[:2])
    assert llm.batch([]) == []
