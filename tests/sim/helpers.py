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
