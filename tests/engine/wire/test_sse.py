"""The incremental SSE parser (gateway_engine.wire.sse), against the event-stream interpretation rules of
https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation: events split
anywhere across chunks, CRLF / LF / CR line ends (a CRLF split between chunks), comments, several data
lines, ``event:``, ``id:`` / ``retry:`` ignored, an event without data not dispatched, the size cap, and
``close()`` for a last event without its blank line.

Speed (a note, not an assertion): the ~240-byte OpenAI chunk of openai_stream_text.sse, measured on a
busy 2-core development machine with CPython 3.11::

    python -m timeit -s "from gateway_engine.wire.sse import SseParser; p = SseParser()
    c = open('tests/engine/wire/fixtures/openai_stream_text.sse', 'rb').read().split(b'\\n\\n')[2] + b'\\n\\n'
    a, b = c[:100], c[100:]" "p.feed(c)"          # about 3 µs per chunk; "p.feed(a); p.feed(b)": 4-5 µs

The JSON parsing of the event that follows (answers.parse_answer, in the decoders) costs about 15 µs.
"""

from __future__ import annotations

import pytest

from gateway_engine.wire import SseEvent, SseParser, SseTooLarge

from .stream_helpers import cuts, transcript


def parse(*pieces: bytes, close: bool = True, **kwargs) -> list[tuple[str, str]]:
    parser = SseParser(**kwargs)
    events = [e for piece in pieces for e in parser.feed(piece)]
    if close:
        events += parser.close()
    return [(e.event, e.data) for e in events]


def every_split(raw: bytes) -> list[list[bytes]]:
    """``raw`` cut into two and three pieces at every pair of positions."""
    return [[raw[:i], raw[i:j], raw[j:]] for i in range(len(raw) + 1) for j in range(i, len(raw) + 1)]


def test_one_event_per_blank_line():
    assert parse(b"data: a\n\ndata: b\n\n") == [("", "a"), ("", "b")]
    assert SseParser().feed(b"data: x\n\n") == [SseEvent("", "x")]


def test_several_data_lines_join_with_newlines_and_event_names_the_event():
    assert parse(b"event: message_stop\ndata: one\ndata:two\ndata:  three\n\n") == [
        ("message_stop", "one\ntwo\n three")  # one space after the colon is dropped, no more
    ]


def test_the_event_name_applies_to_one_event_only():
    assert parse(b"event: ping\ndata: {}\n\ndata: x\n\n") == [("ping", "{}"), ("", "x")]


def test_comments_id_retry_and_unknown_fields_are_ignored():
    raw = b": keep-alive\n:\nid: 7\nretry: 3000\nfoo: bar\ndata: x\n\n: trailing comment\n\n"
    assert parse(raw) == [("", "x")]


def test_an_event_without_data_is_not_dispatched():
    assert parse(b"event: lonely\n\n: comment only\n\ndata: x\n\n") == [("", "x")]


def test_a_field_without_a_colon_and_an_empty_data_line():
    assert parse(b"data\ndata\n\n") == [("", "\n")]
    assert parse(b"data:\n\n") == [("", "")]


@pytest.mark.parametrize(
    "raw",
    [
        b"event: e\r\ndata: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n",
        b"event: e\rdata: a\rdata: b\r\rdata: c\r\r",
        b"event: e\ndata: a\r\ndata: b\r\rdata: c\n\r\n",  # mixed
    ],
    ids=["crlf", "cr", "mixed"],
)
def test_crlf_lf_and_cr_line_ends_split_anywhere(raw):
    expected = [("e", "a\nb"), ("", "c")]
    for pieces in every_split(raw):
        assert parse(*pieces) == expected, pieces


def test_a_crlf_split_between_two_chunks_is_one_line_end():
    parser = SseParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n") == []  # the LF of the CRLF, not a blank line
    assert parser.feed(b"\r") == [SseEvent("", "a")]  # a CR alone ends a line
    assert parser.feed(b"\ndata: b\n\n") == [SseEvent("", "b")]


def test_an_empty_chunk_changes_nothing():
    parser = SseParser()
    assert parser.feed(b"event: e\r") == []
    assert parser.feed(b"") == []
    assert parser.feed(b"\ndata: a\n\n") == [SseEvent("e", "a")]


def test_utf8_split_inside_a_character_and_invalid_bytes_replaced():
    raw = "data: héllo ☃ 冒险\n\n".encode()
    for pieces in every_split(raw):
        assert parse(*pieces) == [("", "héllo ☃ 冒险")]
    assert parse(b"data: \xff\xfe\n\n") == [("", "\ufffd\ufffd")]


def test_a_leading_byte_order_mark_is_dropped_even_split():
    raw = b"\xef\xbb\xbfdata: a\n\n"
    for pieces in every_split(raw):
        assert parse(*pieces) == [("", "a")]
    assert parse(b"data: \xef\xbb\xbfa\n\n") == [("", "\ufeffa")]  # only at the start of the stream


def test_close_returns_a_last_event_without_its_blank_line():
    assert parse(b"data: a\n\ndata: tail", close=False) == [("", "a")]
    assert parse(b"data: a\n\ndata: tail") == [("", "a"), ("", "tail")]
    assert parse(b"event: x\ndata: tail\n") == [("x", "tail")]
    assert parse(b"data: a\n\n") == [("", "a")]
    assert parse(b"") == []


def test_an_event_over_the_cap_raises_sse_too_large():
    assert issubclass(SseTooLarge, ValueError)
    parser = SseParser(max_event_bytes=64)
    assert parser.feed(b"data: " + b"x" * 50 + b"\n\n") == [SseEvent("", "x" * 50)]
    with pytest.raises(SseTooLarge):
        parser.feed(b"data: " + b"x" * 40 + b"\ndata: " + b"y" * 40 + b"\n")  # lines of one event add up
    with pytest.raises(SseTooLarge):
        SseParser(max_event_bytes=64).feed(b"data: " + b"z" * 100)  # a line that never ends
    unbounded = SseParser(max_event_bytes=64)
    with pytest.raises(SseTooLarge):
        for _ in range(20):
            unbounded.feed(b"z" * 10)
    with pytest.raises(ValueError):
        SseParser(max_event_bytes=0)


def test_the_cap_counts_one_event_not_the_stream():
    parser = SseParser(max_event_bytes=64)
    for _ in range(100):
        assert parser.feed(b"data: " + b"x" * 50 + b"\n\n") == [SseEvent("", "x" * 50)]


@pytest.mark.parametrize("name", ["openai_stream_text", "anthropic_stream_tool_use", "gemini_stream_text"])
def test_the_fixture_transcripts_parse_the_same_however_they_are_cut(name):
    raw = transcript(name)
    whole = parse(raw)
    assert whole and all(data for _, data in whole)
    for how, pieces in cuts(raw).items():
        assert parse(*pieces) == whole, how
