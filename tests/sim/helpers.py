import httpx


def chat(sim, name, content="hello world!", max_tokens=8, headers=None, timeout=10.0, client=None):
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    url = sim.provider_url(name) + "/chat/completions"
    if client is not None:
        return client.post(url, json=body, headers=headers or {}, timeout=timeout)
    return httpx.post(url, json=body, headers=headers or {}, timeout=timeout)


async def achat(client, sim, name, content="hello world!", max_tokens=8, headers=None, timeout=10.0):
    body = {"model": "m", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
    return await client.post(
        sim.provider_url(name) + "/chat/completions", json=body, headers=headers or {}, timeout=timeout
    )


ANTHROPIC_HEADERS = {"anthropic-version": "2023-06-01"}
# one client for the kind helpers: httpx.post builds a new client (and SSL context, ~0.1 s) per call
HTTP = httpx.Client(timeout=10)


def anthropic_post(sim, name, body, headers=None, **kw):
    """POST {sim}/{name}/v1/messages with anthropic-version unless ``headers`` replace it."""
    h = ANTHROPIC_HEADERS if headers is None else headers
    return HTTP.post(f"{sim.base_url}/{name}/v1/messages", json=body, headers=h, **kw)


def gemini_post(sim, name, model, body, headers=None, params=None, version="v1beta"):
    url = f"{sim.base_url}/{name}/{version}/models/{model}:generateContent"
    return HTTP.post(url, json=body, headers=headers or {}, params=params)


def azure_post(sim, name, deployment, body, api_version="2024-10-21", headers=None):
    url = f"{sim.base_url}/{name}/openai/deployments/{deployment}/chat/completions"
    params = {} if api_version is None else {"api-version": api_version}
    return HTTP.post(url, json=body, headers=headers or {}, params=params)


def claude_body(content="hello world!", max_tokens=8, **extra):
    return {"model": "claude-sim", "max_tokens": max_tokens, "messages": [{"role": "user", "content": content}],
            **extra}  # fmt: skip


def gemini_body(text="hello world!", **extra):
    return {"contents": [{"role": "user", "parts": [{"text": text}]}], **extra}


def azure_body(content="hello world!", max_tokens=8, **extra):
    return {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, **extra}
