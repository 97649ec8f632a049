"""bankml.server.api.stream_sessions: the session buffer, its cap, the GC, `from` parsing, and (on a bankml-serve
process) what the recorded sessions cannot show: a client that goes away mid-stream, a reader of a live stream,
a stop during the generation, a second request of the same conversation. The answers llama-server gives are
replayed by tests/test_server_sessions.py (stream_sessions, stream_sessions_kinds)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

import server_replay as sr
from bankml.server.api.stream_sessions import (GC_INTERVAL_SECONDS, TTL_SECONDS, OffsetLost, StreamSession,
                                           StreamSessions, _stoull)


def test_buffer_cap_drops_the_oldest_bytes():
    async def run():
        s = StreamSession("c", max_bytes=10)
        assert s.append(b"abcdef") and s.total_bytes == 6 and s.dropped == 0
        s.append(b"ghijk")                              # 11 bytes: the first one goes
        assert (bytes(s.buffer), s.dropped, s.total_bytes) == (b"bcdefghijk", 1, 11)
        assert await s.read(3) == b"defghijk"
        with pytest.raises(OffsetLost):
            await s.read(0)
        s.append(b"0123456789ABC")                      # one chunk past the cap: its tail only
        assert (bytes(s.buffer), s.dropped, s.total_bytes) == (b"3456789ABC", 14, 24)
        s.finalize()
        assert s.append(b"x") is False and await s.read(24) == b"" and await s.read(99) == b""
    asyncio.run(run())


def test_a_reader_waits_for_live_bytes():
    async def run():
        s = StreamSession("c")
        reader = asyncio.ensure_future(s.read(0))
        await asyncio.sleep(0)
        assert not reader.done()
        s.append(b"data: 1\n\n")
        assert await reader == b"data: 1\n\n"
        later = asyncio.ensure_future(s.read(9))
        await asyncio.sleep(0)
        s.finalize()
        assert await later == b"" and s.completed_at > 0
    asyncio.run(run())


def test_replace_evict_lookup_and_gc():
    now = [1000]
    m = StreamSessions(clock=lambda: now[0])
    a = m.create_or_replace("conv::org/model")
    b = m.create_or_replace("conv::org/model")
    assert a.cancelled and a.done and not b.cancelled and m.get("conv::org/model") is b
    c = m.create_or_replace("conv")
    assert m.lookup(["conv"]) == [b, c] or m.lookup(["conv"]) == [c, b]
    assert m.lookup(["conv::org/model", "nope", "co"]) == [b]
    c.finalize()
    now[0] += TTL_SECONDS - 1
    m.collect()
    assert m.get("conv") is c
    now[0] += 1
    m.collect()                                         # finished TTL_SECONDS ago: evicted
    assert m.get("conv") is None and m.get("conv::org/model") is b
    m.evict_and_cancel("conv::org/model")
    assert b.cancelled and b.done and m.get("conv::org/model") is None
    m.evict_and_cancel("unknown")                       # a warning, nothing else
    assert GC_INTERVAL_SECONDS == 60


def test_sessions_iterate_in_unordered_map_order():
    from bankml.server.api.stream_sessions import CxxMapOrder
    from bankml.cxx._stl import unordered_map_order
    keys = [f"conv-{i}::org/model" for i in range(40)]      # past two rehashes (13 and 29 buckets)
    o = CxxMapOrder()
    for k in keys:
        o.insert(k)
    assert o.keys == [keys[i] for i in unordered_map_order([k.encode() for k in keys])]
    # an erase only unlinks; the next key goes first in its bucket's run or first of all
    o.erase(keys[5])
    rest = list(o.keys)
    o.insert("new")
    b = o._bucket("new")
    first = next((i for i, k in enumerate(rest) if o._bucket(k) == b), 0)
    assert o.keys == rest[:first] + ["new"] + rest[first:]


def test_from_is_parsed_as_stoull():
    assert [_stoull(x) for x in ("0", " +12", "\t7x", "0x10", "-1", "18446744073709551615")] == \
        [0, 12, 7, 0, 2**64 - 1, 2**64 - 1]
    for bad in ("", "abc", "+", " -", "18446744073709551616"):
        with pytest.raises(ValueError):
            _stoull(bad)


# --- on a server ---------------------------------------------------------------------------------------------

CHAT = {"messages": [{"role": "user", "content": "Count from 1 to 30."}], "max_tokens": 48, "stream": True,
        "temperature": 0}


def _post_raw(port: int, body: dict, conv: str | None) -> socket.socket:
    data = json.dumps(body)
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               + (f"X-Conversation-Id: {conv}\r\n" if conv else "") +
               f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n{data}").encode())
    return s


def _read_all(s: socket.socket) -> bytes:
    out = bytearray()
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            return bytes(out)
        out += chunk


def _content(events: list) -> str:
    return "".join((c.get("delta") or {}).get("content") or "" for e in events if isinstance(e.get("data"), dict)
                   for c in e["data"].get("choices", []))


def _lookup(port, ids):
    return sr.send(port, {"method": "POST", "path": "/v1/streams/lookup", "body": {"conversation_ids": ids}})


def _wait_done(port, conv, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = json.loads(_lookup(port, [conv])[2])
        if got and got[0]["is_done"]:
            return got[0]
        time.sleep(0.1)
    raise AssertionError(f"{conv} did not finish")


@pytest.fixture(scope="module")
def server(smollm2_path):
    with sr.BankmlServe(["-m", str(smollm2_path), "-t", "2", "-c", "2048", "-np", "1"]) as srv:
        yield srv


@pytest.mark.slow
def test_a_client_that_goes_away_leaves_the_whole_stream(server):
    whole = sr.answer_record(*sr.send(server.port, {"method": "POST", "path": "/v1/chat/completions",
                                                    "body": CHAT}))
    s = _post_raw(server.port, CHAT, "gone")
    assert s.recv(64).startswith(b"HTTP/1.1 200")
    s.close()                                          # the client leaves after the first bytes
    info = _wait_done(server.port, "gone")
    st, _, body = sr.send(server.port, {"method": "GET", "path": "/v1/stream?conv_id=gone&from=0"})
    events = sr.sse_events(body)
    assert st == 200 and len(body) == info["total_bytes"] and events[-1] == {"data": "[DONE]"}
    assert _content(events) == _content(whole["sse"]) and len(_content(events)) > 0


@pytest.mark.slow
def test_a_reader_follows_a_live_stream_and_a_stop_ends_it(server):
    s = _post_raw(server.port, CHAT, "live")
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("live", _read_all(s)))
    t.start()
    st, _, replay = sr.send(server.port, {"method": "GET", "path": "/v1/stream?conv_id=live"})
    t.join(60)
    live = sr.parse_http(got["live"])[2]
    assert st == 200 and replay == live and sr.sse_events(replay)[-1] == {"data": "[DONE]"}

    # DELETE during the generation: the live answer ends without [DONE], the session is gone
    s = _post_raw(server.port, dict(CHAT, max_tokens=400), "stop")
    assert s.recv(64).startswith(b"HTTP/1.1 200")
    time.sleep(0.3)
    assert sr.send(server.port, {"method": "DELETE", "path": "/v1/stream?conv_id=stop"})[0] == 204
    s.settimeout(30)
    tail = _read_all(s)
    assert b"[DONE]" not in tail
    assert sr.send(server.port, {"method": "GET", "path": "/v1/stream?conv_id=stop"})[0] == 404
    # the generation was cancelled: the slot is free for the next request at once
    ok = sr.send(server.port, {"method": "POST", "path": "/v1/chat/completions", "body": dict(CHAT, stream=False,
                                                                                            max_tokens=2)})
    assert ok[0] == 200


@pytest.mark.slow
def test_a_second_request_of_the_conversation_replaces_the_first(server):
    first = _post_raw(server.port, dict(CHAT, max_tokens=400), "again")
    assert first.recv(64).startswith(b"HTTP/1.1 200")
    time.sleep(0.3)
    second = sr.answer_record(*sr.send(server.port, {"method": "POST", "path": "/v1/chat/completions",
                                                     "body": dict(CHAT, max_tokens=4),
                                                     "headers": {"X-Conversation-Id": "again"}}))
    first.settimeout(30)
    assert b"[DONE]" not in _read_all(first)           # the first stream was cancelled
    info = _wait_done(server.port, "again")
    st, _, body = sr.send(server.port, {"method": "GET", "path": "/v1/stream?conv_id=again&from=0"})
    assert st == 200 and len(body) == info["total_bytes"]
    assert _content(sr.sse_events(body)) == _content(second["sse"])
