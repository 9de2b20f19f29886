"""Each kind's request validation: a good request is accepted, each bad shape is refused with the provider's
own status and error body, and every refusal is counted (``shape_rejections``, so a gateway test can assert
0). The reference fixtures (tests/sim/fixtures/<kind>/*.json, each citing its source) are sent as they are
and the simulator's answers must have their shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.sim.helpers import (
    HTTP,
    anthropic_post,
    azure_body,
    azure_post,
    claude_body,
    gemini_body,
    gemini_post,
)

FIXTURES = Path(__file__).parent / "fixtures"
# completions shorter than max_tokens, so answers end the way the fixtures' do (stop / stop_sequence)
COMMON = {"median_ms": 0, "completion_tokens": 3}
CONFIG = {
    "providers": {
        "claude": {"kind": "anthropic", "model": "claude-sim", "api_key": "ak", **COMMON},
        "gem": {"kind": "gemini", "model": "gemini-sim", "api_key": "gk", **COMMON},
        "az": {"kind": "azure_openai", "model": "gpt-4o-sim", "api_key": "zk", **COMMON},
        "gpt": {"kind": "openai", "model": "gpt-sim", **COMMON},
    }
}
AK = {"anthropic-version": "2023-06-01", "x-api-key": "ak"}
GK = {"x-goog-api-key": "gk"}
ZK = {"api-key": "zk"}


@pytest.fixture(scope="module")
def sim():
    from sim.testing import run_simulator_in_thread

    with run_simulator_in_thread(CONFIG) as handle:
        yield handle


def conforms(expected, actual, path="$") -> list[str]:
    """Where ``actual`` lacks the shape of ``expected`` (keys, nesting, JSON types; None = any value)."""
    if expected is None:
        return []
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: expected an object, got {actual!r}"]
        return [p for k, v in expected.items()
                for p in (conforms(v, actual[k], f"{path}.{k}") if k in actual else [f"{path}.{k}: missing"])]  # fmt: skip
    if isinstance(expected, list):
        if not isinstance(actual, list) or (expected and not actual):
            return [f"{path}: expected a non-empty list, got {actual!r}"]
        return conforms(expected[0], actual[0], f"{path}[0]") if expected else []
    if isinstance(expected, bool) or isinstance(actual, bool):
        return [] if type(expected) is type(actual) else [f"{path}: {actual!r} is not a boolean"]
    if isinstance(expected, int | float):
        return [] if isinstance(actual, int | float) else [f"{path}: {actual!r} is not a number"]
    return (
        []
        if isinstance(actual, type(expected))
        else [f"{path}: {actual!r} is not a {type(expected).__name__}"]
    )


def send(sim, kind: str, body: dict):
    if kind == "anthropic":
        return anthropic_post(sim, "claude", body, headers=AK)
    if kind == "gemini":
        return gemini_post(sim, "gem", "gemini-sim", body, headers=GK)
    if kind == "azure_openai":
        return azure_post(sim, "az", "gpt-4o-sim", body, headers=ZK)
    return HTTP.post(sim.provider_url("gpt") + "/chat/completions", json=body)


def with_trigger(kind: str, form: str) -> dict:
    text = f"[[sim:fault:{form}]] hello"
    return {"anthropic": claude_body(text), "gemini": gemini_body(text), "azure_openai": azure_body(text),
            "openai": azure_body(text)}[kind]  # fmt: skip


def fixtures():
    for path in sorted(FIXTURES.glob("*/*.json")):
        yield pytest.param(
            path.parent.name, json.loads(path.read_text()), id=f"{path.parent.name}/{path.stem}"
        )


@pytest.mark.parametrize(("kind", "fixture"), list(fixtures()))
def test_reference_fixtures_are_accepted_and_answered_in_their_shape(sim, kind, fixture):
    assert fixture["source"].startswith("https://")
    if "request" in fixture:
        r = send(sim, kind, fixture["request"])
        assert r.status_code == 200, r.text
        assert conforms(fixture["response"], r.json()) == []
        return
    if "form" not in fixture:  # a validation error's shape: checked by the bad-shape tests below
        return
    r = send(sim, kind, with_trigger(kind, fixture["form"]))
    assert r.status_code == fixture["status"], r.text
    body, expected = r.json(), fixture["body"]
    assert conforms(expected, body) == []
    err, want = body.get("error", {}), expected.get("error", {})
    for key in ("type", "status", "code"):  # the discriminators clients classify on
        if want.get(key) is not None:
            assert err.get(key) == want[key], key
    if kind == "anthropic":
        assert err.get("details") == want.get("details")


def test_error_fixtures_of_validation_match_the_simulators_rejections(sim):
    cases = [("anthropic", "error_invalid_request", anthropic_post(sim, "claude", claude_body(), headers={"x-api-key": "ak"})),
             ("gemini", "error_unknown_name", gemini_post(sim, "gem", "gemini-sim", {**gemini_body(), "generationconfig": {}}, headers=GK)),
             ("azure_openai", "error_deployment_not_found", azure_post(sim, "az", "nope", azure_body(), headers=ZK))]  # fmt: skip
    for kind, name, r in cases:
        fixture = json.loads((FIXTURES / kind / f"{name}.json").read_text())
        assert r.status_code == fixture["status"]
        assert r.json()["error"] == {
            **fixture["body"]["error"],
            **r.json()["error"],
        }  # every field, same value
        assert conforms(fixture["body"], r.json()) == []


ANTHROPIC_BAD = [
    ({"anthropic-version": "2023-06-01", "x-api-key": "ak"}, {"messages": [{"role": "user", "content": "x"}], "model": "m"},
     400, "max_tokens: Field required"),
    (AK, claude_body(max_tokens=0), 400, "max_tokens: Input should be greater than or equal to 1"),
    (AK, claude_body(max_tokens="8"), 400, "max_tokens: Input should be a valid integer"),
    (AK, {"model": "m", "max_tokens": 4}, 400, "messages: Field required"),
    (AK, {"model": "m", "max_tokens": 4, "messages": []}, 400, "messages: at least one message is required"),
    (AK, {"model": "m", "max_tokens": 4, "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]},
     400, 'messages: Unexpected role "system"'),
    (AK, {"model": "m", "max_tokens": 4, "messages": [{"role": "tool", "content": "u"}]}, 400,
     "messages.0.role: Input should be 'user' or 'assistant'"),
    (AK, {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "text"}]}]}, 400,
     "messages.0.content.0.text.text: Field required"),
    (AK, {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "input_text", "text": "x"}]}]},
     400, "messages.0.content.0: Input tag 'input_text' found using 'type' does not match"),
    (AK, {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": ""}]}, 400,
     "messages.0: all messages must have non-empty content"),
    (AK, claude_body(system=[{"type": "image", "source": {}}]), 400, "system.0: Input tag 'image'"),
    (AK, claude_body(system=7), 400, "system: Input should be a valid string or a list of text blocks"),
    (AK, claude_body(temperature=1.5), 400, "temperature: Input should be less than or equal to 1"),
    (AK, claude_body(top_p=-0.1), 400, "top_p: Input should be greater than or equal to 0"),
    (AK, claude_body(top_k=2.5), 400, "top_k: Input should be a valid integer"),
    (AK, claude_body(stop_sequences="END"), 400, "stop_sequences: Input should be a valid list"),
    (AK, claude_body(stop_sequences=["a", 1]), 400, "stop_sequences.1: Input should be a valid string"),
    (AK, claude_body(stop=["x"]), 400, "stop: Extra inputs are not permitted"),
    (AK, claude_body(max_completion_tokens=5), 400, "max_completion_tokens: Extra inputs are not permitted"),
    ({"x-api-key": "ak"}, claude_body(), 400, "anthropic-version: header is required"),
    ({"x-api-key": "ak", "anthropic-version": "2024-01-01"}, claude_body(), 400,
     'anthropic-version: "2024-01-01" is not a valid version'),
    ({"x-api-key": "ak", "anthropic-version": "2026-10-21"}, claude_body(temperature=0.5), 400,
     "`temperature` is not supported in API version 2026-10-21"),
]  # fmt: skip


@pytest.mark.parametrize(("headers", "body", "status", "message"), ANTHROPIC_BAD)
def test_anthropic_refuses_each_bad_shape_with_its_own_error_body(sim, headers, body, status, message):
    before = sim.shape_rejections()["claude"]
    r = anthropic_post(sim, "claude", body, headers=headers)
    assert r.status_code == status
    data = r.json()
    assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"
    assert data["error"]["message"].startswith(message), data
    assert sim.shape_rejections()["claude"] == before + 1


def test_anthropic_accepts_the_documented_shapes_and_checks_the_key(sim):
    good = claude_body(system="terse", temperature=0, top_p=1, top_k=3, stop_sequences=["x"], metadata={"user_id": "u"},
                       messages=[{"role": "user", "content": [{"type": "text", "text": "q"}]},
                                 {"role": "assistant", "content": ""}])  # fmt: skip
    before = sim.counters()["providers"]["claude"]
    assert anthropic_post(sim, "claude", good, headers=AK).status_code == 200
    bearer = {"anthropic-version": "2023-06-01", "authorization": "Bearer ak"}
    assert anthropic_post(sim, "claude", claude_body(), headers=bearer).status_code == 200
    missing = anthropic_post(sim, "claude", claude_body(), headers={"anthropic-version": "2023-06-01"})
    wrong = anthropic_post(sim, "claude", claude_body(), headers={**AK, "x-api-key": "nope"})
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert wrong.json()["error"] == {"type": "authentication_error", "message": "invalid x-api-key"}
    after = sim.counters()["providers"]["claude"]
    assert after["shape_rejections"] == before["shape_rejections"]
    assert after["auth_rejections"] == before["auth_rejections"] + 2


GEMINI_BAD = [
    ({}, 400, "* GenerateContentRequest.contents: contents is not specified"),
    ({"contents": []}, 400, "* GenerateContentRequest.contents: contents is not specified"),
    ({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}, 400, "Please use a valid role: user, model."),
    ({"contents": [{"role": "system", "parts": [{"text": "x"}]}]}, 400, "Please use a valid role: user, model."),
    ({"contents": [{"role": "user", "parts": []}]}, 400, "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty."),
    ({"contents": [{"role": "user", "parts": [{}]}]}, 400, "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data'"),
    ({"contents": [{"role": "user", "parts": [{"text": 5}]}]}, 400, "Invalid value at 'contents[0].parts[0].text' (TYPE_STRING), 5"),
    ({"contents": [{"role": "user", "content": "x"}]}, 400, 'Invalid JSON payload received. Unknown name "content" at \'contents[0]\': Cannot find field.'),
    ({"contents": [{"role": "user", "parts": [{"type": "text", "text": "x"}]}]}, 400, 'Invalid JSON payload received. Unknown name "type" at \'contents[0].parts[0]\''),
    ({"messages": [{"role": "user", "content": "x"}]}, 400, 'Invalid JSON payload received. Unknown name "messages": Cannot find field.'),
    (gemini_body(generationConfig={"max_tokens": 5}), 400, 'Invalid JSON payload received. Unknown name "max_tokens" at \'generation_config\': Cannot find field.'),
    (gemini_body(generationConfig={"stop": ["x"]}), 400, 'Invalid JSON payload received. Unknown name "stop" at \'generation_config\''),
    (gemini_body(generationConfig={"temperature": 2.5}), 400, "* GenerateContentRequest.generation_config.temperature: temperature must be in the range"),
    (gemini_body(generationConfig={"maxOutputTokens": 0}), 400, "* GenerateContentRequest.generation_config.max_output_tokens:"),
    (gemini_body(generationConfig={"maxOutputTokens": "5"}), 400, "Invalid value at 'generation_config.max_output_tokens' (TYPE_INT32)"),
    (gemini_body(generationConfig={"stopSequences": ["a", "b", "c", "d", "e", "f"]}), 400, "* GenerateContentRequest.generation_config.stop_sequences:"),
    (gemini_body(systemInstruction={"parts": []}), 400, "* GenerateContentRequest.system_instruction.parts: contents.parts must not be empty."),
    (gemini_body(system_instruction="be nice"), 400, "Invalid value at 'system_instruction'"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "status", "message"), GEMINI_BAD)
def test_gemini_refuses_each_bad_shape_with_its_own_error_body(sim, body, status, message):
    before = sim.shape_rejections()["gem"]
    r = gemini_post(sim, "gem", "gemini-sim", body, headers=GK)
    assert r.status_code == status
    err = r.json()["error"]
    assert (err["code"], err["status"]) == (400, "INVALID_ARGUMENT")
    assert err["message"].startswith(message), err
    if "Unknown name" in message:
        assert err["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert sim.shape_rejections()["gem"] == before + 1


def test_gemini_accepts_both_field_spellings_and_checks_key_and_model(sim):
    camel = gemini_body(systemInstruction={"parts": [{"text": "s"}]},
                        generationConfig={"maxOutputTokens": 3, "stopSequences": ["x"], "temperature": 2, "topP": 1, "topK": 4})  # fmt: skip
    snake = gemini_body(
        system_instruction={"parts": [{"text": "s"}]}, generation_config={"max_output_tokens": 3}
    )
    tools = {"contents": [{"role": "user", "parts": [{"text": "q"}]},
                          {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {}}}]},
                          {"role": "user", "parts": [{"functionResponse": {"name": "f", "response": {"r": 1}}}]}]}  # fmt: skip
    for body in (camel, snake, tools):
        assert gemini_post(sim, "gem", "gemini-sim", body, headers=GK).status_code == 200
    assert gemini_post(sim, "gem", "gemini-sim", gemini_body(), params={"key": "gk"}).status_code == 200
    missing = gemini_post(sim, "gem", "gemini-sim", gemini_body())
    assert missing.status_code == 403 and missing.json()["error"]["status"] == "PERMISSION_DENIED"
    wrong = gemini_post(sim, "gem", "gemini-sim", gemini_body(), headers={"x-goog-api-key": "nope"})
    assert wrong.status_code == 400 and wrong.json()["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    other = gemini_post(sim, "gem", "gemini-pro", gemini_body(), headers=GK)
    assert other.status_code == 404 and other.json()["error"]["status"] == "NOT_FOUND"
    assert "models/gemini-pro is not found for API version v1beta" in other.json()["error"]["message"]
    url = f"{sim.base_url}/gem/v1beta/models/gemini-sim:countTokens"  # a method the simulator does not serve
    assert HTTP.post(url, json=gemini_body(), headers=GK).status_code == 400


AZURE_BAD = [
    ({"max_tokens": 4}, "Missing required parameter: 'messages'.", "missing_required_parameter"),
    ({"messages": []}, "Invalid 'messages': empty array.", "empty_array"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "Invalid value: 'robot'.", "invalid_value"),
    ({"messages": [{"content": "x"}]}, "Missing required parameter: 'messages[0].role'.", "missing_required_parameter"),
    (azure_body(temperature=2.5), "Invalid 'temperature': decimal above maximum value.", "decimal_above_max_value"),
    (azure_body(top_p=1.5), "Invalid 'top_p': decimal above maximum value.", "decimal_above_max_value"),
    (azure_body(max_tokens=0), "Invalid 'max_tokens': integer below minimum value.", "integer_below_min_value"),
    (azure_body(stop=["a", "b", "c", "d", "e"]), "Invalid 'stop': array too long.", "array_above_max_length"),
    (azure_body(top_k=3), "Unrecognized request argument supplied: top_k", None),
    (azure_body(stop_sequences=["x"]), "Unrecognized request argument supplied: stop_sequences", None),
]  # fmt: skip


@pytest.mark.parametrize(("body", "message", "code"), AZURE_BAD)
def test_azure_refuses_each_bad_body_as_the_openai_api_does(sim, body, message, code):
    before = sim.shape_rejections()["az"]
    r = azure_post(sim, "az", "gpt-4o-sim", body, headers=ZK)
    assert r.status_code == 400
    err = r.json()["error"]
    assert (
        err["type"] == "invalid_request_error" and err["message"].startswith(message) and err["code"] == code
    )
    assert sim.shape_rejections()["az"] == before + 1


def test_azure_route_needs_api_version_deployment_and_key(sim):
    before = sim.counters()["providers"]["az"]
    ok = azure_post(sim, "az", "gpt-4o-sim", azure_body(), headers=ZK)
    assert (
        ok.status_code == 200 and ok.json()["model"] == "gpt-4o-sim" and "prompt_filter_results" in ok.json()
    )
    no_version = azure_post(sim, "az", "gpt-4o-sim", azure_body(), api_version=None, headers=ZK)
    unknown_version = azure_post(sim, "az", "gpt-4o-sim", azure_body(), api_version="2019-01-01", headers=ZK)
    for r in (no_version, unknown_version):
        assert r.status_code == 404 and r.json() == {
            "error": {"code": "404", "message": "Resource not found"}
        }
    deployment = azure_post(sim, "az", "gpt-5", azure_body(), headers=ZK)
    assert deployment.status_code == 404 and deployment.json()["error"]["code"] == "DeploymentNotFound"
    bearer = azure_post(sim, "az", "gpt-4o-sim", azure_body(), headers={"Authorization": "Bearer zk"})
    assert bearer.status_code == 401  # Azure's key header is api-key
    after = sim.counters()["providers"]["az"]
    assert after["shape_rejections"] - before["shape_rejections"] == 3
    assert after["auth_rejections"] - before["auth_rejections"] == 1


def test_a_provider_answers_only_on_its_kinds_route_and_counts_every_request(sim):
    rid = {"X-Request-ID": "wrong-route"}
    before = sim.counters()["providers"]
    routes = [
        (f"{sim.base_url}/claude/v1/chat/completions", azure_body()),  # anthropic provider, openai route
        (f"{sim.base_url}/gem/v1/messages", claude_body()),  # gemini provider, anthropic route
        (f"{sim.base_url}/gpt/v1beta/models/gpt-sim:generateContent", gemini_body()),
        (
            f"{sim.base_url}/gpt/openai/deployments/gpt-sim/chat/completions?api-version=2024-10-21",
            azure_body(),
        ),
        (f"{sim.base_url}/az/v1/chat/completions", azure_body()),
        (f"{sim.base_url}/claude/messages", claude_body()),  # a base_url without /v1
    ]
    for url, body in routes:
        assert HTTP.post(url, json=body, headers=rid).status_code == 404
    after = sim.counters()["providers"]
    for name, n in (("claude", 2), ("gem", 1), ("gpt", 2), ("az", 1)):
        assert after[name]["shape_rejections"] - before[name]["shape_rejections"] == n
        assert sim.request_counts()[name]["wrong-route"] == n


def test_a_body_that_is_not_json_is_refused_in_each_kinds_shape(sim):
    anth = HTTP.post(f"{sim.base_url}/claude/v1/messages", content=b"{", headers=AK)
    gem = HTTP.post(f"{sim.base_url}/gem/v1beta/models/gemini-sim:generateContent", content=b"{", headers=GK)
    az = HTTP.post(f"{sim.base_url}/az/openai/deployments/gpt-4o-sim/chat/completions?api-version=2024-10-21",
                    content=b"{", headers=ZK)  # fmt: skip
    assert anth.status_code == gem.status_code == az.status_code == 400
    assert anth.json()["error"]["type"] == "invalid_request_error"
    assert gem.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert az.json()["error"]["type"] == "invalid_request_error"
