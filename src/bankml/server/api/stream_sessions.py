"""Resumable streams: llama-server b11192's stream sessions (tools/server/server-stream.cpp).

    sessions = StreamSessions()                     # one per app (app.state.streams)
    s = sessions.create_or_replace(conv_id)         # a completion request with an X-Conversation-Id header
    body = tee(s, sse_chunks, on_stop)              # the live answer's body; the session keeps every byte
    routes                                          # GET /v1/stream, DELETE /v1/stream, POST /v1/streams/lookup

A completion request (/completion, /v1/completions, /v1/chat/completions) carrying `X-Conversation-Id` opens a
session under that id once its body has parsed (and, for chat, its messages): any earlier session of the id is
cancelled and replaced. A non-stream request, or one that fails before its stream starts, leaves nothing: the
session is evicted when its answer is written. A stream's SSE bytes go to the client and into the session (a
buffer of at most 4 MiB, the oldest bytes dropped past that); a client that goes away does not stop the
generation: the rest is drained into the session, to be read again with GET /v1/stream?conv_id=ID&from=N
(the bytes from offset N, then the live ones until the stream ends). DELETE /v1/stream?conv_id=ID is the user's
stop: the session is cancelled (the live answer ends, the generation is cancelled) and evicted (204, then 404).
POST /v1/streams/lookup {"conversation_ids": [...]} lists the sessions of the ids asked for (an id matches
itself and ID::anything). Every minute, sessions finished more than 300 s ago are evicted.
"""

from __future__ import annotations

import asyncio
import logging
import time

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..http import error_response, json_response, not_found

log = logging.getLogger("bankml.server")

TTL_SECONDS = 300
MAX_BYTES = 4 * 1024 * 1024
GC_INTERVAL_SECONDS = 60

SSE_HEADERS = {"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}


def now_seconds() -> int:
    return int(time.time())


class OffsetLost(Exception):
    """The offset asked for fell below the bytes the cap dropped."""


class StreamSession:
    """One conversation's stream: the SSE bytes (a capped buffer), done / cancelled, and its times."""

    def __init__(self, conversation_id: str, max_bytes: int = MAX_BYTES, clock=now_seconds):
        self.conversation_id = conversation_id
        self.clock = clock
        self.started_at = clock()
        self.completed_at = 0
        self.max_bytes = max_bytes
        self.buffer = bytearray()
        self.dropped = 0
        self.done = False
        self.cancelled = False
        self._changed = asyncio.Event()
        self.on_cancel = None          # the producer's stop (set by tee)

    @property
    def total_bytes(self) -> int:
        return self.dropped + len(self.buffer)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def append(self, data: bytes) -> bool:
        if not data:
            return True
        if self.done:
            return False
        if len(data) >= self.max_bytes:
            # one chunk past the cap: only its tail stays
            skip = len(data) - self.max_bytes
            self.dropped += len(self.buffer) + skip
            self.buffer = bytearray(data[skip:])
        else:
            over = len(self.buffer) + len(data) - self.max_bytes
            if over > 0:
                del self.buffer[:over]
                self.dropped += over
            self.buffer += data
        self._wake()
        return True

    def finalize(self) -> None:
        if self.done:
            return
        self.done = True
        self.completed_at = self.clock()
        self._wake()

    def cancel(self) -> None:
        self.cancelled = True
        if self.on_cancel is not None:
            self.on_cancel()

    async def read(self, offset: int) -> bytes:
        """The bytes from `offset` to the end so far, waiting for some while the stream is live; b"" once it is
        done with nothing past `offset`. Raises OffsetLost."""
        while True:
            if offset < self.dropped:
                raise OffsetLost(offset)
            if offset < self.total_bytes:
                return bytes(self.buffer[offset - self.dropped:])
            if self.done:
                return b""
            await self._changed.wait()


class CxxMapOrder:
    """The iteration order of a libstdc++ std::unordered_map<std::string, V> under inserts of new keys and erases:
    the nodes of one bucket (std::hash % bucket count) are contiguous; a new key goes first in its bucket's run, or
    first in the whole list when its bucket is empty; a rehash (the growth schedule of
    bankml.cxx._stl.GROWTH, when the size would pass the bucket count) re-inserts every node the same way in
    the old order; an erase only unlinks its node."""

    def __init__(self):
        self.keys: list[str] = []
        self.n_buckets = 1
        self.next_resize = 0
        self._hash: dict[str, int] = {}

    def _bucket(self, key: str) -> int:
        h = self._hash.get(key)
        if h is None:
            from ...cxx._stl import std_hash
            h = self._hash[key] = std_hash(key.encode("utf-8", "surrogateescape"))
        return h % self.n_buckets

    def _link(self, keys: list[str], key: str) -> None:
        b = self._bucket(key)
        i = next((i for i, k in enumerate(keys) if self._bucket(k) == b), 0)
        keys.insert(i, key)

    def insert(self, key: str) -> None:
        if len(self.keys) + 1 > self.next_resize:
            from ...cxx._stl import GROWTH
            self.n_buckets = next(nb for _, nb in GROWTH if nb > self.n_buckets)
            self.next_resize = self.n_buckets
            old, self.keys = self.keys, []
            for k in old:
                self._link(self.keys, k)
        self._link(self.keys, key)

    def erase(self, key: str) -> None:
        self.keys.remove(key)
        self._hash.pop(key, None)


class StreamSessions:
    """stream_session_manager: the live sessions by conversation id (at most one each), and their GC. `sessions`
    iterates in the order of llama-server's std::unordered_map (lookup answers in it)."""

    def __init__(self, clock=now_seconds, max_bytes: int = MAX_BYTES):
        self._map: dict[str, StreamSession] = {}
        self._order = CxxMapOrder()
        self.clock = clock
        self.max_bytes = max_bytes
        self._gc_task = None

    @property
    def sessions(self) -> dict[str, StreamSession]:
        return {k: self._map[k] for k in self._order.keys}

    def _pop(self, conversation_id: str) -> StreamSession | None:
        s = self._map.pop(conversation_id, None)
        if s is not None:
            self._order.erase(conversation_id)
        return s

    def create_or_replace(self, conversation_id: str) -> StreamSession:
        self._start_gc()
        fresh = StreamSession(conversation_id, self.max_bytes, self.clock)
        previous = self._map.get(conversation_id)
        if previous is None:
            self._order.insert(conversation_id)
        self._map[conversation_id] = fresh
        if previous is not None:
            previous.cancel()
            previous.finalize()
        return fresh

    def get(self, conversation_id: str) -> StreamSession | None:
        return self._map.get(conversation_id)

    def evict(self, conversation_id: str) -> None:
        s = self._pop(conversation_id)
        if s is not None:
            s.finalize()

    def evict_and_cancel(self, conversation_id: str) -> None:
        s = self._pop(conversation_id)
        if s is None:
            log.warning("stop on unknown stream session, conv_id=%s matched nothing, %d live: [%s]",
                        conversation_id, len(self.sessions), ", ".join(self.sessions))
            return
        s.cancel()
        s.finalize()

    def lookup(self, ids: list[str]) -> list[StreamSession]:
        out = []
        live = list(self.sessions.values())
        for rid in ids:
            for s in live:
                if s.conversation_id == rid or s.conversation_id.startswith(rid + "::"):
                    out.append(s)
        return out

    def collect(self) -> None:
        """One GC pass: evict the sessions finished at least TTL_SECONDS ago."""
        cutoff = self.clock() - TTL_SECONDS
        for cid, s in self.sessions.items():
            if s.completed_at != 0 and s.completed_at <= cutoff:
                self._pop(cid)
                s.finalize()

    def _start_gc(self) -> None:
        if self._gc_task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return

        async def gc_loop():
            while True:
                await asyncio.sleep(GC_INTERVAL_SECONDS)
                self.collect()
        self._gc_task = loop.create_task(gc_loop())

    def stop(self) -> None:
        """stop_gc: finalize every session so no reader hangs."""
        if self._gc_task is not None:
            self._gc_task.cancel()
            self._gc_task = None
        sessions = list(self.sessions.values())
        self._map, self._order = {}, CxxMapOrder()
        for s in sessions:
            s.finalize()


def conv_id_from_headers(raw_headers) -> str:
    """server_stream_conv_id_from_headers: the X-Conversation-Id value (any case), "" when absent. `raw_headers`
    are the ASGI (name, value) byte pairs; with several, the last one counts (llama-server's header map)."""
    value = ""
    for k, v in raw_headers:
        if k.lower() == b"x-conversation-id":
            value = v.decode("utf-8", "surrogateescape")     # the header's bytes (an id is a byte string)
    return value


def tee(session: StreamSession, chunks, on_stop=None):
    """server_res_spipe: the live answer's body over the async iterator `chunks` (the SSE bytes). Each chunk the
    client is sent goes into the session too; when the client goes away, the rest is drained into the session;
    a cancelled session ends both (the live answer without its last chunks) and closes `chunks` (whose cleanup
    cancels the generation). The session is finalized when `chunks` ends or stops."""
    it = chunks.__aiter__()
    loop = asyncio.get_running_loop()
    state = {"pending": None, "finished": False, "closed": False}
    stop = asyncio.Event()
    session.on_cancel = stop.set

    async def pull():
        # the next chunk, or None when the stream ended or the session was cancelled
        if session.cancelled:
            return None
        fut = state["pending"]
        if fut is None:
            fut = state["pending"] = asyncio.ensure_future(it.__anext__())
        waiter = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({fut, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if not fut.done():
            return None
        state["pending"] = None
        try:
            return fut.result()
        except StopAsyncIteration:
            state["finished"] = True
            return None

    async def close():
        if state["closed"]:
            return
        state["closed"] = True
        fut = state["pending"]
        try:
            if fut is not None and not fut.done():
                fut.cancel()
                try:
                    await fut
                except BaseException:
                    pass
            elif not state["finished"] and hasattr(it, "aclose"):
                await it.aclose()
        finally:
            session.finalize()
            if on_stop is not None:
                on_stop()

    async def step():
        # the tee: a chunk pulled goes into the session (None: the end)
        chunk = await pull()
        if chunk is not None:
            session.append(chunk)
        return chunk

    async def drain():
        # on_complete: the client is gone, the stream goes on into the session until it ends or is cancelled
        try:
            while await step() is not None:
                pass
        finally:
            await close()

    async def live():
        handed_over = False
        try:
            while (chunk := await step()) is not None:
                yield chunk
        except (asyncio.CancelledError, GeneratorExit):
            handed_over = not session.cancelled and not state["finished"]
            if handed_over:
                loop.create_task(drain())
            raise
        finally:
            if state["finished"]:
                state["closed"] = True
                session.finalize()
                if on_stop is not None:
                    on_stop()
            elif not handed_over:
                loop.create_task(close())
    return live()


# --- routes ------------------------------------------------------------------------------------------------

def _stoull(text: str) -> int:
    """std::stoull(text) (base 10): leading white space, a sign (a minus wraps modulo 2^64), the leading digits;
    ValueError when there is no digit or the value does not fit in 64 bits."""
    i, n = 0, len(text)
    while i < n and text[i] in " \t\n\v\f\r":
        i += 1
    neg = False
    if i < n and text[i] in "+-":
        neg = text[i] == "-"
        i += 1
    j = i
    while j < n and "0" <= text[j] <= "9":
        j += 1
    if j == i:
        raise ValueError("stoull")
    v = int(text[i:j])
    if v >= 1 << 64:
        raise ValueError("stoull")
    return (-v) % (1 << 64) if neg else v


def _sessions(request: Request) -> StreamSessions:
    return request.app.state.streams


async def get_stream(request: Request) -> Response:
    conv_id = request.query_params.get("conv_id", "")
    if not conv_id:
        return error_response("Missing conversation id in path", 400)
    session = _sessions(request).get(conv_id)
    if session is None:
        # "Stream not found or expired", which cpp-httplib's error handler (server-http.cpp) replaces, as it does
        # every 404 body, with its File Not Found
        return await not_found(request)
    offset = 0
    from_text = request.query_params.get("from", "")
    if from_text:
        try:
            offset = _stoull(from_text)
        except ValueError:
            return error_response("Invalid 'from' offset", 400)
    if offset < session.dropped:
        return error_response("Stream offset lost, please restart", 400)

    async def replay():
        pos = offset
        while True:
            try:
                chunk = await session.read(pos)
            except OffsetLost:
                return
            if not chunk:
                return
            pos += len(chunk)
            yield chunk
    return StreamingResponse(replay(), status_code=200, headers=SSE_HEADERS)


async def delete_stream(request: Request) -> Response:
    conv_id = request.query_params.get("conv_id", "")
    if not conv_id:
        return error_response("Missing conversation id in path", 400)
    _sessions(request).evict_and_cancel(conv_id)
    return Response(status_code=204, media_type="application/json")


async def lookup(request: Request) -> Response:
    from ...cxx import nljson
    try:
        body = nljson.loads(await request.body())
    except nljson.JSONParseError as e:
        return json_response({"error": {"message": f"invalid body: {e}", "type": "invalid_request_error"}}, 400)
    ids = []
    if isinstance(body, dict) and isinstance(body.get("conversation_ids"), list):
        ids = [v for v in body["conversation_ids"] if isinstance(v, str) and v]
    found = _sessions(request).lookup(ids) if ids else []
    return json_response([{"conversation_id": s.conversation_id, "is_done": s.done, "total_bytes": s.total_bytes,
                           "started_at": s.started_at, "completed_at": s.completed_at} for s in found])


routes = [
    Route("/v1/stream", get_stream, methods=["GET"]),
    Route("/v1/stream", delete_stream, methods=["DELETE"]),
    Route("/v1/streams/lookup", lookup, methods=["POST"]),
]
