"""The Python client (client/, docs/client.md) against a running gateway: a batch, one interactive call,
and — when langchain-core is installed — the LangChain Runnable. Needs only the client (no Django):

    pip install './client[langchain]'                     # or: make venv (installs it into .venv)
    make up                                               # gateway on :8000, simulator, examples/providers.json
    .venv/bin/python manage.py create_team demo
    export GATEWAY_API_KEY=$(.venv/bin/python manage.py create_api_key --team demo | tail -1)
    .venv/bin/python examples/client.py                   # --url, --key, --limit, --route: see --help

Submits the first --limit items of examples/batch.jsonl as one batch (a progress bar on stderr), prints
each RESULT's custom_id, provider and answer in input order, then asks one question through
/v1/chat/completions, then sends three prompts through GatewayRunnable.batch (one more gateway batch).
Exit status 0 when every item succeeded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from batch_gateway_client import BadRequestError, Gateway, GatewayError

ITEMS = Path(__file__).resolve().parent / "batch.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("GATEWAY_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("GATEWAY_API_KEY"), help="a team's API key")
    parser.add_argument("--limit", type=int, default=12, help="how many items of examples/batch.jsonl")
    parser.add_argument("--route", help="send every item to this route instead of the file's")
    args = parser.parse_args()
    if not args.key:
        parser.error("give --key or set GATEWAY_API_KEY (manage.py create_api_key --team NAME)")

    items = [json.loads(line) for line in ITEMS.read_text().splitlines() if line.strip()][: args.limit]
    if args.route:
        for item in items:
            item["route"] = args.route
    with Gateway(args.url, args.key, timeout=60, retries=3) as gw:
        try:
            results = gw.batch(
                items, progress=True, priority="normal", metadata={"source": "examples/client.py"}
            )
        except BadRequestError as error:  # nothing was stored; each refused field is named
            for e in error.errors:
                print(f"refused: {e}", file=sys.stderr)
            return 2
        for r in results:
            answer = (
                r["response"]["choices"][0]["message"]["content"] if r["ok"] else f"[{r['error']['type']}]"
            )
            print(f"{r['custom_id']:<16} {r['provider'] or '-':<8} {answer[:60]!r}")
        ok = sum(r["ok"] for r in results)
        print(f"{ok}/{len(results)} items succeeded")

        route = items[0]["route"]
        try:
            completion = gw.chat(route, "Say hello in three words.", max_tokens=16)
            print("chat:", completion["choices"][0]["message"]["content"])
        except GatewayError as error:  # e.g. 503 asgi_required when the web server is not the ASGI app
            print(f"chat: {error}", file=sys.stderr)

    try:
        from batch_gateway_client.langchain import GatewayRunnable
    except ImportError:
        print("langchain-core not installed: pip install './client[langchain]' for GatewayRunnable")
        return 0 if ok == len(results) else 1
    llm = GatewayRunnable(args.url, args.key, model=route, max_tokens=16)
    # one gateway batch; max_concurrency would be ignored: the gateway paces the calls itself
    for message in llm.batch(["Name a colour.", "Name a fruit.", "Name a planet."]):
        print("runnable:", message.content, message.usage_metadata)
    return 0 if ok == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
