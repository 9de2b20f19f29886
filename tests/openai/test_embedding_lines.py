"""/v1/batches input lines with ``"url": "/v1/embeddings"`` (issue #39): each becomes an embeddings ITEM
(its input, the rest of the body as params), a line of the other endpoint is refused per line as
OpenAI reports it, and an embeddings RESULT is written as OpenAI's Batch API writes an output line."""

from __future__ import annotations

import io
import json

from openai_api.conversion import EMBEDDINGS, ENDPOINTS, line_error_from_native, read_input, result_line


def read(lines, endpoint=EMBEDDINGS):
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    return read_input(
        io.BytesIO(data),
        endpoint=endpoint,
        max_items=100,
        max_item_bytes=10**6,
        routes={"emb"},
        providers={"p"},
    )


def line(custom_id, body, url=EMBEDDINGS):
    return {"custom_id": custom_id, "method": "POST", "url": url, "body": body}


def test_embeddings_is_a_batch_endpoint():
    assert "/v1/embeddings" in ENDPOINTS and "/v1/chat/completions" in ENDPOINTS


def test_embedding_lines_become_embedding_items():
    parsed = read(
        [
            line("a", {"model": "emb", "input": "one chunk"}),
            line("b", {"model": "p", "input": ["x", "y"], "dimensions": 64, "encoding_format": "float"}),
        ]
    )
    assert parsed.errors == []
    assert parsed.items == [
        {"custom_id": "a", "route": "emb", "endpoint": "embeddings", "input": "one chunk", "params": {}},
        {
            "custom_id": "b",
            "provider": "p",
            "endpoint": "embeddings",
            "input": ["x", "y"],
            "params": {"dimensions": 64, "encoding_format": "float"},
        },
    ]


def test_a_chat_line_in_an_embeddings_batch_is_refused_on_its_line():
    parsed = read(
        [line("a", {"model": "emb", "input": "x"}), line("b", {"model": "emb"}, "/v1/chat/completions")]
    )
    assert [(e.code, e.param, e.line) for e in parsed.errors] == [("invalid_url", "url", 2)]
    assert "/v1/embeddings" in parsed.errors[0].message


def test_a_native_input_error_names_the_body_field():
    error = line_error_from_native(0, "input", "must not be empty", [3])
    assert (error.code, error.param, error.line) == ("invalid_request", "body.input", 3)


def test_an_embeddings_result_is_an_openai_output_line():
    answer = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.1, 0.2]}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    result = {"custom_id": "a", "ok": True, "response": answer, "error": None}
    ok, out = result_line(result, "batch_x")
    assert ok and out["error"] is None and out["custom_id"] == "a"
    assert out["response"]["status_code"] == 200 and out["response"]["body"] == answer
    assert out["id"].startswith("batch_req_") and out["response"]["request_id"].startswith("req_")
