"""A loopback HTTP server that records the raw requests it receives and answers each path with fixed bytes: the
"target" behind a server's /cors-proxy in recorded sessions (testing/record_server.py) and their replays
(tests/server_replay.py).

    with Target() as t:            # listens on 127.0.0.1:<free port>; t.authority == "127.0.0.1:<port>"
                                   # (and over TLS, self-signed: t.tls_authority, `$TLSTARGET`)
        ...                        # requests to http://$TARGET/<path> (see ROUTES)
        t.take()                   # the raw requests received since the last take(), as text

Each connection carries one request (the answer closes it; redirects say `Connection: close` too, else
cpp-httplib may send the next hop on the closed socket): request line, headers and body (Content-Length or
chunked) are kept byte for byte, with the target's own authority written `$TARGET` (`localhost:$PORT` when
reached as localhost).
"""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

_OK = "HTTP/1.1 200 OK\r\n"

#: path -> the raw answer ("$TARGET" is the target's own host:port)
ROUTES = {
    "/plain": _OK + "Content-Type: text/plain\r\nContent-Length: 2\r\nX-Custom: v1\r\n\r\nok",
    "/json": _OK + "Content-Type: application/json\r\nContent-Length: 11\r\nServer: target/1\r\n"
                   "Access-Control-Allow-Origin: *\r\nKeep-Alive: timeout=9\r\nX-Other: two\r\n\r\n{\"a\":[1,2]}",
    "/notype": _OK + "Content-Length: 5\r\n\r\nhello",
    "/close": "HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>until close</p>",
    "/chunked": _OK + "Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nCache-Control: no-cache\r\n\r\n"
                      "b\r\ndata: one\n\n\r\nb\r\ndata: two\n\n\r\n0\r\n\r\n",
    "/empty": "HTTP/1.1 204 No Content\r\nX-Empty: yes\r\n\r\n",
    "/missing": "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nnope",
    "/fail": "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 16\r\n"
             "Retry-After: 3\r\n\r\n{\"error\":\"busy\"}",
    "/redirect": "HTTP/1.1 302 Found\r\nConnection: close\r\nLocation: /plain\r\nContent-Length: 0\r\n\r\n",
    "/redirect-abs": "HTTP/1.1 301 Moved Permanently\r\nConnection: close\r\nLocation: http://$TARGET/json?x=1\r\nContent-Length: 0\r\n\r\n",
    "/see-other": "HTTP/1.1 303 See Other\r\nConnection: close\r\nLocation: /plain\r\nContent-Length: 0\r\n\r\n",
    "/noloc": "HTTP/1.1 302 Found\r\nConnection: close\r\nContent-Length: 3\r\nContent-Type: text/plain\r\n\r\nabc",
    "/redirect-ftp": "HTTP/1.1 302 Found\r\nConnection: close\r\nLocation: ftp://x/\r\nContent-Length: 0\r\n\r\n",
    "/dup": _OK + "Content-Type: text/plain\r\nX-Dup: first\r\nX-Dup: second\r\nx-lower: a\r\nSet-Cookie: a=1\r\n"
                  "Content-Length: 3\r\n\r\ndup",
    "/redirect-cross": "HTTP/1.1 307 Temporary Redirect\r\nConnection: close\r\nLocation: http://localhost:$PORT/json\r\n"
                       "Content-Length: 0\r\n\r\n",
    "/loop": "HTTP/1.1 302 Found\r\nConnection: close\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n",
    "/short": _OK + "Content-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc",
    "/badchunk": _OK + "Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nzz\r\n",
    "/binary": _OK + "Content-Type: application/octet-stream\r\nContent-Length: 4\r\n\r\n\x00\xff\x80A",
}
DEFAULT = _OK + "Content-Type: text/plain\r\nContent-Length: 7\r\n\r\ndefault"


#: paths answered as soon as the head arrives when the request says `Expect: 100-continue`: with `100 Continue`
#: (then the body is read), or with the final answer at once (the body is never sent)
CONTINUE = {"/continue": "HTTP/1.1 100 Continue\r\n\r\n"}
EARLY = {"/early": "HTTP/1.1 417 Expectation Failed\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nno"}


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    fields = {}
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        fields[k.strip().lower()] = v.strip()
    path = head.split(b" ")[1].decode("latin-1").split("?")[0] if head.count(b" ") >= 2 else "/"
    if fields.get(b"expect", b"").lower() == b"100-continue" and not body:
        if path in EARLY:
            return head + b"\r\n\r\n"
        if path in CONTINUE:
            conn.sendall(CONTINUE[path].encode())
    if fields.get(b"transfer-encoding", b"").lower() == b"chunked":
        while not body.endswith(b"0\r\n\r\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
    else:
        n = int(fields.get(b"content-length", b"0") or 0)
        while len(body) < n:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
    return head + b"\r\n\r\n" + body


class Target:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.authority = f"127.0.0.1:{self.sock.getsockname()[1]}"
        # the same routes over TLS with a self-signed certificate (proxy_target_tls.pem): clients that verify
        # certificates refuse it
        self.tls_sock = socket.socket()
        self.tls_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tls_sock.bind(("127.0.0.1", 0))
        self.tls_sock.listen(16)
        self.tls_authority = f"127.0.0.1:{self.tls_sock.getsockname()[1]}"
        self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.tls.load_cert_chain(str(Path(__file__).with_name("proxy_target_tls.pem")))
        self.seen: list[str] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._serve, args=(self.sock, False), daemon=True),
                        threading.Thread(target=self._serve, args=(self.tls_sock, True), daemon=True)]

    def __enter__(self) -> "Target":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
        self.tls_sock.close()

    def _serve(self, sock: socket.socket, tls: bool) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn, tls), daemon=True).start()

    def _one(self, conn: socket.socket, tls: bool = False) -> None:
        with conn:
            conn.settimeout(30)
            try:
                if tls:
                    conn = self.tls.wrap_socket(conn, server_side=True)
                raw = _read_request(conn)
            except (OSError, ssl.SSLError):
                return
            if not raw:              # a client that gave up (e.g. refused the certificate) sent nothing
                return
            with self.lock:
                self.seen.append(raw.decode("latin-1").replace(self.authority, "$TARGET")
                                 .replace(self.tls_authority, "$TLSTARGET")
                                 .replace("localhost:" + self.authority.split(":")[1], "localhost:$PORT"))
            target = raw.split(b" ", 2)[1].decode("latin-1") if raw.count(b" ") >= 2 else "/"
            path = target.split("?")[0]
            answer = (EARLY.get(path) or ROUTES.get(path, DEFAULT)).replace("$TARGET", self.authority).replace(
                "$PORT", self.authority.split(":")[1])
            try:
                conn.sendall(answer.encode("latin-1"))
                if not tls:
                    conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def take(self) -> list[str]:
        with self.lock:
            out, self.seen = self.seen, []
        return out
