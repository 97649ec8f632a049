"""llama-server's `/cors-proxy` (tools/server/server-cors-proxy.h, server_http_proxy in server-models.cpp, and the
cpp-httplib 0.58 client it drives): GET and POST `/cors-proxy?url=<target>` forward the request to the target and
stream its answer back. Enabled by `--ui-mcp-proxy` (or `--agent`); otherwise both answer 403 "this feature is
disabled". Like every non-public route it needs the API key when one is set (bankml.server.http.LlamaHTTP).

What is reproduced (each observed on llama-server b11192, tests/oracle/server/sessions.json "cors_proxy_*"):
- the query string as cpp-httplib parses it (pairs split at '&', '+' is a space, %XX decoded, the last `url`
  wins); the URL as common_http_parse_url splits it, with its errors (500 "invalid URL: no scheme",
  "unsupported URL scheme: X", "invalid IPv6 URL authority: X", "invalid target URL: missing host",
  "authentication in target URL is not supported"; a port std::stoi cannot read: 400 "stoi", one out of int
  range: 500 "stoi");
- only the `x-llama-server-proxy-header-<name>` headers are forwarded, as `<name>` (Accept-Encoding,
  Transfer-Encoding and Content-Length left out; a Host header gets the target's authority); the request line
  and headers as cpp-httplib writes them (path and query re-encoded, Host first, Connection: close, Accept: */*,
  Content-Type: text/plain for an untyped body, Content-Length, Expect: 100-continue from 1024 body bytes);
- redirects (301-399 but 304) followed up to 20 times (303 turns a POST into a bare GET; a cross-host hop drops
  Host, Authorization, Proxy-Authorization, Cookie, Cookie2), then "Maximum redirect count exceeded";
- the answer: the target's status, its headers but Server, Transfer-Encoding, Content-Length, Keep-Alive and
  Access-Control-*, plus X-Accel-Buffering: no; its Content-Type (else llama-server's JSON type); the body
  streamed as it comes (chunked). A failure before the answer's head: 500 "proxy error: <cpp-httplib's error
  text>" (e.g. "Could not establish connection"); after it: that text appended to the body. A target's 404 goes
  through cpp-httplib's error handler as on llama-server: JSON type, Content-Length 74, the target's body.

Limits (documented in docs/cors_proxy.md): ASGI gives header names lower-cased, so a forwarded `<name>` keeps
the case only when the client sent it lower-case (llama-server forwards the client's case); multipart request
bodies are refused (llama-server rebuilds them with a random boundary); compressed answers are passed through
as sent.

bankml's departure (issue 19, finding 6): before the URL is read an enabled /cors-proxy asks
bankml.server.agent.guard, which refuses (403) a foreign Origin (the default allows localhost origins only, even
where the server's CORS default is `*`), a foreign Host on a loopback connection and a cross-site request
without Origin, so no other site reads what the host reaches; `--agent-open` turns that off.
"""

from __future__ import annotations

import asyncio
import ssl

from starlette.requests import Request
from starlette.routing import Route

from ..http import JSON_TYPE, error_response, feature_disabled
from . import guard

PREFIX = "x-llama-server-proxy-header-"
TIMEOUT = 600                 # timeout_read / timeout_write given by proxy_request (seconds)
REDIRECT_MAX = 20             # CPPHTTPLIB_REDIRECT_MAX_COUNT
EXPECT_100_THRESHOLD = 1024   # CPPHTTPLIB_EXPECT_100_THRESHOLD
EXPECT_100_WAIT = 1.0         # CPPHTTPLIB_EXPECT_100_TIMEOUT_MSECOND
NOT_FOUND_LENGTH = 74         # the length of llama-server's 404 body, which the error handler sets
_STRIPPED = ("server", "transfer-encoding", "content-length", "keep-alive")


class ProxyError(Exception):
    """A cpp-httplib client error: the text of httplib::to_string(Error)."""


class Refusal(Exception):
    """An exception ex_wrapper turns into llama-server's error body: status 400 (std::invalid_argument) or 500."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


# ---------------------------------------------------------------- cpp-httplib's URL pieces (bytes as latin-1 str)

def _hex(s: str, i: int, n: int) -> int | None:
    part = s[i:i + n]
    if len(part) != n or any(c not in "0123456789abcdefABCDEF" for c in part):
        return None
    return int(part, 16)


def decode_query_component(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "%" and i + 2 < len(s) and (v := _hex(s, i + 1, 2)) is not None:
            out.append(chr(v))
            i += 3
            continue
        out.append(" " if c == "+" else c)
        i += 1
    return "".join(out)


_QUERY_SAFE = set("-._~!$'()*,;:@/?")


def encode_query_component(s: str) -> str:
    out = []
    for c in s:
        if c.isascii() and (c.isalnum() or c in _QUERY_SAFE):
            out.append(c)
        elif c == " ":
            out.append("+")
        else:
            out.append("%%%02X" % ord(c))
    return "".join(out)


def _trim(s: str) -> str:
    return s.strip(" \t")


def _split(s: str, d: str) -> list[str]:
    return [p for p in (_trim(x) for x in s.split(d)) if p]


def parse_query(query: str) -> dict[str, str]:
    """parse_query_text + server_http_req's map: pairs at '&' (trimmed, an exact repeat dropped), key=value at
    the first '=', both decoded; an empty key dropped; the last value of a key wins."""
    seen, params = set(), {}
    for kv in _split(query, "&"):
        if kv in seen:
            continue
        seen.add(kv)
        key, _, val = kv.partition("=")
        if key:
            params[decode_query_component(key)] = decode_query_component(val)
    return params


def normalize_query(query: str) -> str:
    out = []
    for kv in _split(query, "&"):
        key, eq, val = kv.partition("=")
        if key:
            item = encode_query_component(decode_query_component(key))
            if val or eq:
                item += "=" + encode_query_component(decode_query_component(val))
            out.append(item)
    return "&".join(out)


_PATH_ESC = {" ": "%20", "+": "%2B", "\r": "%0D", "\n": "%0A", "'": "%27", ",": "%2C", ";": "%3B"}


def encode_path(s: str) -> str:
    s = s.split("\0", 1)[0]
    return "".join(_PATH_ESC.get(c) or ("%%%02X" % ord(c) if ord(c) >= 0x80 else c) for c in s)


def request_target(path: str) -> str:
    """encode_request_target(path, true): the path encoded, the query normalized (left out when empty)."""
    p, q, query = path.partition("?")
    out = encode_path(p)
    if query:
        norm = normalize_query(query)
        if norm:
            out += "?" + norm
    return out


def decode_path_component(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        if s[i] == "%" and i + 1 < len(s):
            if s[i + 1] == "u":
                v = _hex(s, i + 2, 4)
                if v is not None:
                    if not 0xD800 <= v <= 0xDFFF:
                        out.append(chr(v).encode("utf-8").decode("latin-1"))
                    i += 6
                    continue
            else:
                v = _hex(s, i + 1, 2)
                if v is not None:
                    out.append(chr(v))
                    i += 3
                    continue
        out.append(s[i])
        i += 1
    return "".join(out)


def _stoi(s: str) -> int:
    """std::stoi: leading blanks, a sign, digits (the rest ignored); 400 "stoi" without digits, 500 out of range."""
    t = s.lstrip(" \t\n\v\f\r")
    j = 1 if t[:1] in "+-" and t[:1] else 0
    k = j
    while k < len(t) and t[k].isascii() and t[k].isdigit():
        k += 1
    if k == j:
        raise Refusal("stoi", 400)
    v = int(t[:k])
    if not -2**31 <= v < 2**31:
        raise Refusal("stoi", 500)
    return v


def parse_target(url: str) -> tuple[str, str, str, str, int, str]:
    """common_http_parse_url: (scheme, user, password, host, port, path); Refusal on what it throws."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise Refusal("invalid URL: no scheme")
    if scheme not in ("http", "https"):
        raise Refusal("unsupported URL scheme: " + scheme)
    user = password = ""
    if "@" in rest:
        auth, _, rest = rest.partition("@")
        user, _, password = auth.partition(":")
    host, slash, path = rest.partition("/")
    path = "/" + path if slash else "/"
    port_str = ""
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise Refusal("invalid IPv6 URL authority: " + host)
        after = host[close + 1:]
        if after.startswith(":"):
            port_str = after[1:]
        host = host[1:close]
    elif ":" in host:
        host, _, port_str = host.partition(":")
    port = _stoi(port_str) if port_str else (80 if scheme == "http" else 443)
    return scheme, user, password, host, port, path


def host_string(host: str, port: int, scheme: str) -> str:
    h = f"[{host}]" if ":" in host else host
    return h if (scheme, port) in (("http", 80), ("https", 443)) else f"{h}:{port}"


def parse_location(loc: str):
    """detail::parse_url: (scheme, host, port, path, query) or None."""
    pos, scheme, host, port, path, query = 0, "", "", "", "", ""
    sep = loc.find("://")
    if sep >= 0:
        scheme = loc[:sep]
        if not scheme or any(not "a" <= c <= "z" for c in scheme):
            return None
        pos = sep + 3
    elif loc.startswith("//"):
        pos = 2
    prefix = pos > 0
    if prefix or (loc and loc[0] not in "/?#"):
        if pos < len(loc) and loc[pos] == "[":
            close = loc.find("]", pos)
            if close < 0:
                return None
            host = loc[pos + 1:close]
            if not host or any(c not in "0123456789abcdefABCDEF:" for c in host):
                return None
            pos = close + 1
            if pos < len(loc) and loc[pos] not in ":/?#":
                return None
        else:
            end = _find_first(loc, ":/?#", pos)
            host, pos = loc[pos:end], end
        if pos < len(loc) and loc[pos] == ":":
            end = _find_first(loc, "/?#", pos + 1)
            port, pos = loc[pos + 1:end], end
        if not prefix and pos < len(loc):
            host = port = ""
            pos = 0
    if pos < len(loc) and loc[pos] not in "?#":
        end = _find_first(loc, "?#", pos)
        path, pos = loc[pos:end], end
    if pos < len(loc) and loc[pos] == "?":
        end = loc.find("#", pos)
        query = loc[pos:end if end >= 0 else len(loc)]
    return scheme, host, port, path, query


def _find_first(s: str, chars: str, pos: int) -> int:
    for i in range(pos, len(s)):
        if s[i] in chars:
            return i
    return len(s)


def _parse_port(s: str) -> int | None:
    # from_chars: an optional '-', digits, then 1..65535
    t = s[1:] if s.startswith("-") else s
    k = 0
    while k < len(t) and t[k].isascii() and t[k].isdigit():
        k += 1
    if k == 0:
        return None
    v = int(t[:k]) * (-1 if s.startswith("-") else 1)
    return v if 1 <= v <= 65535 else None


# ---------------------------------------------------------------- the client (cpp-httplib's ClientImpl)

class Hop:
    """One request of the exchange: where it goes and what it carries."""

    def __init__(self, method, scheme, host, port, path, headers, body):
        self.method, self.scheme, self.host, self.port = method, scheme, host, port
        self.path, self.headers, self.body = path, headers, body

    def head(self) -> bytes:
        """The request line and headers as ClientImpl::write_request writes them."""
        hs = list(self.headers)
        have = {k.lower() for k, _ in hs}
        if len(self.body) >= EXPECT_100_THRESHOLD and "expect" not in have:
            hs.append(("Expect", "100-continue"))
        if "connection" not in have:
            hs.append(("Connection", "close"))
        if "host" not in have:
            hs.insert(0, ("Host", host_string(self.host, self.port, self.scheme)))
        if "accept" not in have:
            hs.append(("Accept", "*/*"))
        if self.body and "content-type" not in have:
            hs.append(("Content-Type", "text/plain"))
        if self.body or self.method in ("POST", "PUT", "PATCH"):
            if "content-length" not in have:
                hs.append(("Content-Length", str(len(self.body))))
        text = f"{self.method} {request_target(self.path)} HTTP/1.1\r\n"
        text += "".join(f"{k}: {v}\r\n" for k, v in hs) + "\r\n"
        return text.encode("latin-1", "replace")


class Upstream:
    """An open answer: status, headers (name, value) in the order received, and the body still to read."""

    def __init__(self, reader, writer, status, headers, method):
        self.reader, self.writer, self.status, self.headers, self.method = reader, writer, status, headers, method

    def header(self, name: str) -> str:
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return ""

    async def chunks(self):
        """The body as it arrives (chunked / Content-Length / until close); ProxyError on a read failure."""
        r = self.reader
        if self.status in (204, 304) or self.method == "HEAD":
            return
        try:
            if "chunked" in self.header("transfer-encoding").lower():
                while True:
                    line = await asyncio.wait_for(r.readline(), TIMEOUT)
                    if not line.endswith(b"\n"):
                        raise ProxyError("Failed to read connection")
                    size = line.split(b";")[0].strip()
                    try:
                        n = int(size, 16)
                    except ValueError:
                        raise ProxyError("Failed to read connection") from None
                    if n == 0:
                        while (await asyncio.wait_for(r.readline(), TIMEOUT)).strip():
                            pass
                        return
                    data = await asyncio.wait_for(r.readexactly(n), TIMEOUT)
                    yield data
                    if await asyncio.wait_for(r.readexactly(2), TIMEOUT) != b"\r\n":
                        raise ProxyError("Failed to read connection")
            elif self.header("content-length"):
                left = int(self.header("content-length"))
                while left > 0:
                    data = await asyncio.wait_for(r.read(min(left, 1 << 16)), TIMEOUT)
                    if not data:
                        raise ProxyError("Failed to read connection")
                    left -= len(data)
                    yield data
            else:
                while data := await asyncio.wait_for(r.read(1 << 16), TIMEOUT):
                    yield data
        except (asyncio.IncompleteReadError, OSError, ValueError):
            raise ProxyError("Failed to read connection") from None
        except asyncio.TimeoutError:
            raise ProxyError("Read timeout") from None

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


async def _connect(hop: Hop):
    try:
        ctx = ssl.create_default_context() if hop.scheme == "https" else None
        return await asyncio.wait_for(asyncio.open_connection(
            hop.host, hop.port, ssl=ctx, server_hostname=hop.host if ctx else None), TIMEOUT)
    except ssl.SSLCertVerificationError:
        raise ProxyError("SSL server verification failed") from None
    except ssl.SSLError:
        raise ProxyError("SSL connection failed") from None
    except asyncio.TimeoutError:
        raise ProxyError("Connection timed out") from None
    except (OSError, ValueError, OverflowError, UnicodeError):
        raise ProxyError("Could not establish connection") from None


async def _read_head(reader) -> tuple[int, list[tuple[str, str]]]:
    line = await asyncio.wait_for(reader.readline(), TIMEOUT)
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise ProxyError("Failed to read connection")
    headers = []
    while True:
        h = await asyncio.wait_for(reader.readline(), TIMEOUT)
        if not h.endswith(b"\n"):
            raise ProxyError("Failed to read connection")
        h = h.decode("latin-1").rstrip("\r\n")
        if not h:
            break
        k, sep, v = h.partition(":")
        if sep:
            headers.append((k, v.strip(" \t")))
    return int(parts[1]), headers


def _head_fields(head: bytes) -> list[tuple[str, str]]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(k, v) for k, _, v in (x.partition(": ") for x in lines) if k]


async def _send(hop: Hop) -> Upstream:
    reader, writer = await _connect(hop)
    try:
        head = hop.head()
        writer.write(head)
        await asyncio.wait_for(writer.drain(), TIMEOUT)
        status = headers = None
        if any(k.lower() == "expect" and "100-continue" in v.lower() for k, v in _head_fields(head)):
            try:
                status, headers = await asyncio.wait_for(_read_head(reader), EXPECT_100_WAIT)
            except asyncio.TimeoutError:
                pass
            if status == 100:
                status = None
            if status is None:
                writer.write(hop.body)
                await asyncio.wait_for(writer.drain(), TIMEOUT)
        else:
            writer.write(hop.body)
            await asyncio.wait_for(writer.drain(), TIMEOUT)
        while status is None or status == 100:
            status, headers = await _read_head(reader)
        return Upstream(reader, writer, status, headers, hop.method)
    except ProxyError:
        writer.close()
        raise
    except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
        writer.close()
        raise ProxyError("Failed to read connection") from None


_CROSS_HOST_DROPPED = ("host", "proxy-authorization", "authorization", "cookie", "cookie2")


async def exchange(hop: Hop) -> Upstream:
    """send with follow_location: 301-399 (but 304) redirects followed, as ClientImpl::redirect does."""
    left = REDIRECT_MAX
    while True:
        up = await _send(hop)
        if not (300 < up.status < 400 and up.status != 304):
            return up
        async for _ in up.chunks():     # a redirect's body is read and dropped
            pass
        up.close()
        if left == 0:
            raise ProxyError("Maximum redirect count exceeded")
        loc = up.header("location")
        parsed = parse_location(loc) if loc else None
        if parsed is None or (parsed[0] and parsed[0] not in ("http", "https")):
            raise ProxyError("Unknown")
        scheme, host, port_str, path, query = parsed
        port = hop.port
        if port_str:
            port = _parse_port(port_str)
            if port is None:
                raise ProxyError("Unknown")
        elif scheme:
            port = 443 if scheme == "https" else 80
        scheme, host, path = scheme or hop.scheme, host or hop.host, path or "/"
        headers, method, body = hop.headers, hop.method, hop.body
        if (scheme, host, port) != (hop.scheme, hop.host, hop.port):
            headers = [(k, v) for k, v in headers if k.lower() not in _CROSS_HOST_DROPPED]
        if up.status == 303 and method not in ("GET", "HEAD"):
            method, body, headers = "GET", b"", []
        hop = Hop(method, scheme, host, port, decode_path_component(path) + query, headers, body)
        left -= 1


# ---------------------------------------------------------------- the route

def forwarded_headers(raw_headers, scheme: str, host: str, port: int) -> list[tuple[str, str]]:
    """proxy_request's header map: x-llama-server-proxy-header-<name> -> <name> (in std::map order), then
    server_http_proxy's filter (Accept-Encoding, Transfer-Encoding, Content-Length out; Host rewritten)."""
    picked: dict[str, str] = {}
    for k, v in raw_headers:
        name = k.decode("latin-1")
        if name.lower().startswith(PREFIX) and len(name) > len(PREFIX):
            picked[name[len(PREFIX):]] = v.decode("latin-1")
    out = []
    for k in sorted(picked, key=lambda s: s.encode("latin-1")):
        low = k.lower()
        if low in ("accept-encoding", "transfer-encoding", "content-length"):
            continue
        out.append((k, host_string(host, port, scheme) if low == "host" else picked[k]))
    return out


def answer_headers(up: Upstream) -> tuple[list[tuple[bytes, bytes]], str]:
    """The answer's headers (std::map order, the last of a name wins) and its Content-Type."""
    kept: dict[str, str] = {"X-Accel-Buffering": "no"}
    ctype = ""
    for k, v in up.headers:
        low = k.lower()
        if low in _STRIPPED or low.startswith("access-control-"):
            continue
        if low == "content-type":
            ctype = v
            continue
        kept[k] = v
    hs = [(k.encode("latin-1"), kept[k].encode("latin-1")) for k in sorted(kept, key=lambda s: s.encode("latin-1"))]
    return hs, ctype or JSON_TYPE


class ProxyAnswer:
    """The streamed answer (an ASGI app): the target's head, then its body as it comes."""

    def __init__(self, status: int, headers, ctype: str, body, first: bytes = b""):
        self.status, self.headers, self.ctype, self.body, self.first = status, headers, ctype, body, first

    async def __call__(self, scope, receive, send):
        # the client going away stops the stream (llama-server's should_stop), closing the upstream
        work = asyncio.ensure_future(self._answer(send))
        gone = asyncio.ensure_future(_disconnected(receive))
        done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
        for task in (work, gone):
            if task not in done:
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        if work in done:
            work.result()

    async def _answer(self, send):
        hs = list(self.headers) + [(b"content-type", self.ctype.encode("latin-1"))]
        if self.status == 404:
            await self._not_found(hs, send)
            return
        await send({"type": "http.response.start", "status": self.status, "headers": hs})
        if self.first:
            await send({"type": "http.response.body", "body": self.first, "more_body": True})
        if self.body is not None:
            try:
                async for chunk in self.body:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            except ProxyError as e:
                await send({"type": "http.response.body", "body": f"proxy error: {e}".encode(), "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _not_found(self, hs, send):
        # cpp-httplib's error handler (llama-server's 404 body) runs on the streamed answer: JSON type,
        # Content-Length of that body, then the target's own bytes; a client reading by Content-Length reads
        # at most those 74 bytes
        hs = [(k, v) for k, v in hs if k != b"content-type"] + [
            (b"content-type", JSON_TYPE.encode()), (b"content-length", str(NOT_FOUND_LENGTH).encode())]
        await send({"type": "http.response.start", "status": 404, "headers": hs})
        sent = 0
        try:
            async for chunk in self.body:
                chunk = chunk[:NOT_FOUND_LENGTH - sent]
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    sent += len(chunk)
                if sent >= NOT_FOUND_LENGTH:
                    break
        except ProxyError:
            pass
        if sent == NOT_FOUND_LENGTH:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        # shorter: the connection closes before the declared length, as llama-server's does (the server
        # reports an incomplete answer and closes)


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _drain(up: Upstream):
    try:
        async for chunk in up.chunks():
            yield chunk
    finally:
        up.close()


async def cors_proxy(request: Request):
    cfg = request.app.state.cfg
    if not cfg.ui_mcp_proxy:
        return feature_disabled()
    refused = guard.refusal(request, "/cors-proxy")   # bankml's: a foreign page's request, before any connection
    if refused is not None:
        return refused
    try:
        query = request.scope.get("query_string", b"").decode("latin-1").split("#", 1)[0]
        url = parse_query(query).get("url", "")
        scheme, user, password, host, port, path = parse_target(url)
        if not host:
            raise Refusal("invalid target URL: missing host")
        if password:
            raise Refusal("authentication in target URL is not supported")
    except Refusal as e:
        return error_response(str(e), e.status)
    ctype = request.headers.get("content-type", "")
    if "multipart/form-data" in ctype:
        return error_response("/cors-proxy with a multipart/form-data body is not reproduced by bankml "
                              "(llama-server rebuilds it with a random boundary)", 501)
    body = await request.body()
    headers = forwarded_headers(request.scope["headers"], scheme, host, port)
    method = "POST" if request.method == "POST" else "GET"   # cpp-httplib serves HEAD with the GET handler
    try:
        up = await exchange(Hop(method, scheme, host, port, path, headers, body))
    except ProxyError as e:
        return ProxyAnswer(500, [(b"X-Accel-Buffering", b"no")], JSON_TYPE, None, f"proxy error: {e}".encode())
    hs, ctype = answer_headers(up)
    return ProxyAnswer(up.status, hs, ctype, _drain(up))


routes = [Route("/cors-proxy", cors_proxy, methods=["GET", "POST"])]
