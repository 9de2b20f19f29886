"""The simulated Amazon Bedrock (sim/wire_bedrock.py, sim/sigv4.py) against boto3 and the gateway's own
client: boto3's bedrock-runtime accepts its Converse and ConverseStream answers (eventstream framing
with CRC32 checksums, parsed by botocore) and its errors; it refuses a request signed with the wrong
secret, an unsigned one and a malformed body as Bedrock does; and the gateway's client (signing each
request, decoding the event stream) gets the OpenAI shapes."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from gateway_engine.http import AiohttpProviderClient
from gateway_engine.routing import ProviderConfig
from gateway_engine.signing import Credentials, sign

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
KEY_ID, SECRET, REGION = "AKIASIMULATOR", "sim/secret+key", "us-east-1"
BEDROCK = {
    "kind": "bedrock",
    "model": MODEL,
    "api_key": SECRET,
    "region": REGION,
    "aws_access_key_id": KEY_ID,
    "median_ms": 0,
    "completion_tokens": 5,
}
CONFIG = {"providers": {"br": BEDROCK, "slow": {**BEDROCK, "rpm": 2}}}


@pytest.fixture(scope="module")
def sim():
    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


def client(sim, name="br", secret=SECRET):
    boto3 = pytest.importorskip("boto3")
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name=REGION,
        endpoint_url=f"{sim.base_url}/{name}",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=secret,
        config=Config(retries={"total_max_attempts": 1}),
    )


def test_boto3_accepts_the_converse_answer(sim):
    answer = client(sim).converse(
        modelId=MODEL,
        messages=[{"role": "user", "content": [{"text": "hello"}]}],
        system=[{"text": "be brief"}],
        inferenceConfig={"maxTokens": 50, "temperature": 0.2},
    )
    assert answer["output"]["message"]["role"] == "assistant"
    assert answer["output"]["message"]["content"][0]["text"].startswith("[br] ")
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"]["outputTokens"] == 5 and answer["usage"]["totalTokens"] > 5


def test_boto3_accepts_the_converse_stream(sim):
    answer = client(sim).converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}]
    )
    events = list(answer["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart" and kinds[-3:] == ["contentBlockStop", "messageStop", "metadata"]
    text = "".join(e["contentBlockDelta"]["delta"]["text"] for e in events if "contentBlockDelta" in e)
    assert text == "[br] " + "tok " * 5
    assert events[-1]["metadata"]["usage"]["outputTokens"] == 5


def test_boto3_reads_the_errors_as_bedrock_sends_them(sim):
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError) as wrong_secret:
        client(sim, secret="not-the-secret").converse(
            modelId=MODEL, messages=[{"role": "user", "content": [{"text": "x"}]}]
        )
    assert wrong_secret.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert wrong_secret.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as alternation:
        client(sim).converse(
            modelId=MODEL,
            messages=[
                {"role": "user", "content": [{"text": "a"}]},
                {"role": "user", "content": [{"text": "b"}]},
            ],
        )
    assert alternation.value.response["Error"]["Code"] == "ValidationException"
    assert "alternate between user and assistant" in alternation.value.response["Error"]["Message"]
    slow = client(sim, "slow")
    codes = []
    for _ in range(4):
        try:
            slow.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "x"}]}])
        except ClientError as exc:
            codes.append((exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]))
    assert (429, "ThrottlingException") in codes


def signed_post(sim, body: bytes, path: str = f"/br/model/{MODEL.replace(':', '%3A')}/converse", **creds):
    url = f"{sim.base_url}{path}"
    credentials = Credentials(creds.get("key_id", KEY_ID), creds.get("secret", SECRET))
    headers = sign(
        "POST",
        url,
        {"Content-Type": "application/json"},
        body,
        credentials,
        region=creds.get("region", REGION),
        service="bedrock",
    )
    return httpx.post(url, content=body, headers=headers, timeout=10)


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (
            {"modelId": MODEL, "messages": [{"role": "user", "content": [{"text": "x"}]}]},
            "extraneous key [modelId]",
        ),
        ({"messages": []}, "at least one message"),
        ({"messages": [{"role": "assistant", "content": [{"text": "x"}]}]}, "must start with a user message"),
        ({"messages": [{"role": "user", "content": "x"}]}, "content: Member must have length"),
        ({"messages": [{"role": "user", "content": [{"text": "x", "image": {}}]}]}, "exactly one member"),
        ({"messages": [{"role": "user", "content": [{"text": 3}]}]}, "text: expected a string"),
        (
            {
                "messages": [{"role": "user", "content": [{"text": "x"}]}],
                "inferenceConfig": {"temperature": 1.5},
            },
            "temperature: Member must have value between 0 and 1",
        ),
        (
            {
                "messages": [{"role": "user", "content": [{"text": "x"}]}],
                "inferenceConfig": {"max_tokens": 5},
            },
            "extraneous key [max_tokens]",
        ),
        (
            {"messages": [{"role": "user", "content": [{"text": "x"}]}], "system": [{"text": ""}]},
            "system.0.text",
        ),
    ],
)
def test_the_simulator_refuses_what_bedrock_refuses(sim, body, words):
    r = signed_post(sim, json.dumps(body).encode())
    assert r.status_code == 400, r.text
    assert r.headers["x-amzn-ErrorType"].startswith("ValidationException:")
    assert words in r.json()["message"]


def test_the_signature_is_verified(sim):
    body = json.dumps({"messages": [{"role": "user", "content": [{"text": "x"}]}]}).encode()
    assert signed_post(sim, body).status_code == 200
    unsigned = httpx.post(f"{sim.base_url}/br/model/{MODEL}/converse", content=body, timeout=10)
    assert unsigned.status_code == 403 and unsigned.headers["x-amzn-ErrorType"].startswith(
        "MissingAuthentication"
    )
    assert (
        signed_post(sim, body, secret="other")
        .json()["message"]
        .startswith("The request signature we calculated")
    )
    assert (
        signed_post(sim, body, key_id="AKIAOTHER")
        .headers["x-amzn-ErrorType"]
        .startswith("UnrecognizedClient")
    )
    assert "scoped to a valid region" in signed_post(sim, body, region="eu-west-1").json()["message"]
    wrong_model = signed_post(sim, body, path="/br/model/amazon.titan/converse")
    assert wrong_model.status_code == 400 and "model identifier is invalid" in wrong_model.json()["message"]


def gateway_config(sim) -> ProviderConfig:
    return ProviderConfig.from_dict(
        {
            "name": "br",
            "base_url": sim.kind_url("br", "bedrock"),
            "model": MODEL,
            "kind": "bedrock",
            "api_key": SECRET,
            "region": REGION,
            "aws_access_key_id": KEY_ID,
            "rpm": 1000,
            "tpm": 10**7,
            "max_concurrency": 4,
            "timeout_seconds": 10,
        }
    )


def test_the_gateways_client_signs_each_request_and_reads_answers_and_streams(sim):
    async def run():
        client = AiohttpProviderClient(gateway_config(sim))
        try:
            plain = await client.chat(
                [{"role": "user", "content": "hi"}], {"max_tokens": 20}, request_id="r1"
            )
            opened = await client.open_stream([{"role": "user", "content": "hi"}], {"max_tokens": 20})
            assert opened.stream is not None, opened
            chunks = [c async for c in opened.stream.chunks()]
            return plain, opened, chunks
        finally:
            await client.aclose()

    before = sim.counters()["providers"]["br"]
    plain, opened, chunks = asyncio.run(run())
    assert plain.ok, plain
    assert plain.body["object"] == "chat.completion" and plain.native["stopReason"] == "end_turn"
    assert plain.body["choices"][0]["message"]["content"] == "[br] " + "tok " * 5
    assert plain.usage["completion_tokens"] == 5
    assert opened.ok and opened.stream.done and opened.stream.error is None
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "[br] " + "tok " * 5
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert opened.stream.decoder.usage["completion_tokens"] == 5
    after = sim.counters()["providers"]["br"]
    assert after["auth_rejections"] == before["auth_rejections"]
    assert after["shape_rejections"] == before["shape_rejections"]


def test_an_in_stream_exception_reaches_boto3_and_the_gateway_as_bedrock_sends_it(sim):
    from botocore.exceptions import EventStreamError

    text = "hi [[sim:stream_error_after=1]]"
    answer = client(sim).converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": text}]}]
    )
    with pytest.raises(EventStreamError) as raised:
        list(answer["stream"])
    assert raised.value.response["Error"]["Code"] == "modelStreamErrorException"

    async def run():
        gateway = AiohttpProviderClient(gateway_config(sim))
        try:
            opened = await gateway.open_stream([{"role": "user", "content": text}], {"max_tokens": 20})
            chunks = [c async for c in opened.stream.chunks()]
            return opened, chunks
        finally:
            await gateway.aclose()

    opened, chunks = asyncio.run(run())
    assert chunks and opened.stream.error is not None
    assert (opened.stream.error.error_type, opened.stream.error.code) == (
        "server_error",
        "modelStreamErrorException",
    )
