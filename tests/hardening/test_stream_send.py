"""A reader too slow to take one chunk of a stream within GATEWAY_STREAM_SEND_TIMEOUT_SECONDS ends the
stream (gateway_site.ingress.stream_send): the send that waits on the client's socket is given up, as if
the client had gone, so the view's generator closes the upstream call and releases the lease. Before:
the send waited as long as the client kept its connection open, holding the lease."""

from __future__ import annotations

import asyncio

import pytest

from gateway_site.ingress import StreamCut, stream_send


def test_a_send_the_client_does_not_take_ends_the_stream(settings):
    settings.GATEWAY_STREAM_SEND_TIMEOUT_SECONDS = 0.2
    sent = []

    async def stuck_socket(message):  # uvicorn's send waits on flow control while the client reads nothing
        sent.append(message)
        if len(sent) > 1:
            await asyncio.Event().wait()

    async def run():
        send = stream_send(stuck_socket)
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        with pytest.raises(StreamCut) as cut:
            await asyncio.wait_for(
                send({"type": "http.response.body", "body": b"data: 2\n\n", "more_body": True}), 10
            )
        return cut.value

    cut = asyncio.run(run())
    assert isinstance(cut, OSError) and "did not read the stream" in str(cut)
    assert len(sent) == 2
