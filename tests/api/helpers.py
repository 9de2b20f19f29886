"""Helpers shared by the API tests."""

from __future__ import annotations

import json

DROP = object()  # marks a key to remove from item()
URL = "/api/v1/batches"


def item(i: int = 0, **overrides):
    """A valid ITEM; overrides replace keys, DROP removes them."""
    base = {"custom_id": f"c{i}", "route": "intent", "query": f"question {i}"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not DROP}


def post_json(client, body, url=URL):
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.generic("POST", url, data, content_type="application/json")


def post_jsonl(client, items, url=URL, content_type="application/jsonl"):
    data = "\n".join(json.dumps(x) for x in items) + "\n"
    return client.generic("POST", url, data, content_type=content_type)
