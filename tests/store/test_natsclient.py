"""The quicker header parser gives what nats-py's own gives, for the headers
events are appended with and for any header block at all; a connection made
through `casino.natsclient` uses it, and reads the same headers from a real
server as a plain nats-py connection."""

from __future__ import annotations

import nats
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from casino import natsclient
from casino.natsclient import parse_header_lines
from casino.store import envelope, subjects
from casino.store.jetstream import STREAM, JetStreamEventStore, ensure_streams
from tests.examples import examples

APPENDED = (b"Nats-Expected-Last-Subject-Sequence: 258\r\nNats-Msg-Id: shoe:BAC-1-000018:draw:0\r\n"
            b"Nats-Expected-Last-Subject-Sequence-Subject: casino.ev.BAC-1.BAC-1-shoe-1.*.shoe\r\n"
            b"Nats-Expected-Stream: CASINO\r\n\r\n")

# Header names and values as they come, odd ones included: whitespace inside or
# around a name, no colon, a colon in the value, bytes that are not ASCII or not UTF-8.
_pieces = st.sampled_from([b"Nats-Msg-Id", b"X", b" Pad ", b"In side", b"Tab\tbed", b"\x1fUnit", b"Caf\xc3\xa9",
                           b"\xff", b"", b":", b": ", b"a:b", b"value", b" 42 ", b"\xe2\x82\xac", b"\xc3"])
_line = st.lists(_pieces, max_size=4).map(b"".join)


@pytest.mark.parametrize("raw", [APPENDED, b"", b"\r\n", b"No colon\r\n\r\n", b"A:1\r\nA: 2\r\n", b"K:\r\n",
                                 b"Na me: x\r\nOk: y\r\n", b"\xff\xfe: x\r\n", b"V: \xff\r\n", b":empty\r\n"])
def test_the_same_headers_as_nats_py_gives(raw: bytes) -> None:
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_line, max_size=6).map(b"\r\n".join))
def test_any_header_block_gives_what_nats_py_gives(raw: bytes) -> None:
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)
    assert parse_header_lines(raw) == Client._parse_header_lines(raw)  # and again, its names remembered


@pytest.mark.anyio
async def test_a_connection_reads_the_same_headers_as_a_plain_one(nats_url: str) -> None:
    plain = await nats.connect(nats_url)
    quick = await natsclient.connect(nats_url)
    try:
        assert quick._parse_header_lines is parse_header_lines
        assert plain._parse_header_lines is not parse_header_lines
        parsed: list[bytes] = []  # nats-py parses what the connection receives with the connection's own parser

        def spy(raw: bytes) -> dict[str, str]:
            parsed.append(raw)
            return parse_header_lines(raw)

        quick._parse_header_lines = spy  # type: ignore[method-assign]
        headers = {"Nats-Msg-Id": "dealer-policy:T-000001:open", "Nats-Expected-Last-Subject-Sequence": "0"}
        received = [await nc.subscribe("headed") for nc in (plain, quick)]
        await plain.flush()
        await quick.flush()
        await plain.publish("headed", b"{}", headers={**headers, "Plain": " v "})
        got = [(await sub.next_msg(timeout=5)).headers for sub in received]
        assert got[0] == got[1] == {**headers, "Plain": "v"}
        assert len(parsed) == 1
        await ensure_streams(plain.jetstream())  # and the store's reads, which take each message's id from its headers
        subject = subjects.event("T", "T-shoe-1", "T-000001", "coup")
        await plain.jetstream().publish(subject, envelope.encode(envelope.Batch(())), stream=STREAM, headers=headers)
        stored = await JetStreamEventStore(quick).read(subject)
        assert [m.msg_id for m in stored] == ["dealer-policy:T-000001:open"] and len(parsed) > 1
    finally:
        await plain.close()
        await quick.close()
