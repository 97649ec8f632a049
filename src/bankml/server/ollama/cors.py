"""Ollama v0.13.3's browser rules on bankml's Ollama paths (`/` and `/api/...`, bankml.server.routing.is_ollama),
on every listener, in place of llama-server's CORS (docs/ollama.md, "Browser and Host rules").

Ollama's GenerateRoutes (server/routes.go:1462) runs two middlewares before every route, in this order; bankml's
`verdict(scope)` answers what they answer:

1. gin-contrib/cors v1.7.2 (config.go:70 applyCors) over Ollama's config: cors.DefaultConfig's methods, Ollama's
   AllowHeaders (routes.go:1465), AllowWildcard, AllowBrowserExtensions, and envconfig.AllowedOrigins
   (envconfig/config.go:60): $OLLAMA_ORIGINS split on commas, then http(s)://localhost, 127.0.0.1 and 0.0.0.0 with or
   without `:*`, and app://*, file://*, tauri://*, vscode-webview://*, vscode-file://*.
   - no Origin (or an empty one), or an Origin equal to `http://` or `https://` + the Host header: not a CORS
     request, nothing added;
   - an Origin the list does not allow: 403, no body, no header;
   - OPTIONS from an allowed Origin: 204 at once with the preflight headers (methods, headers, Max-Age 43200,
     Vary) and the Origin, before the Host is looked at;
   - any other method: `Vary: Origin` and the Origin (`Access-Control-Allow-Origin: *` when the list holds `*`),
     never credentials.
2. allowedHostsMiddleware (routes.go:1423), only when the listener is bound to a loopback address: the Host's name
   (Go's net.SplitHostPort, else the whole value) must be an allowed IP (bankml.server.agent.guard.ip_allowed) or
   an allowed name (guard.name_allowed); an OPTIONS with an allowed *name* is 204 at once; else 403, no body.

The listener's address: bankml-serve records the addresses it bound (app.state.listeners, by server/cli.py); a
connection's own address names its listener when one is bound to it, else the wildcard listener on its port. An app
served without that record (tests, another ASGI server) uses the connection's address; a UNIX socket has none (no
check, as Ollama with no address).

An OLLAMA_ORIGINS that Ollama refuses at startup (an entry with no scheme and no `*`, or two `*`: a panic in
cors.New) makes bankml refuse every cross-origin request on these paths (fail closed; logged once), since its other
routes keep serving.

It knows request headers, the listener's address and the environment; it must not know the routes.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field

from ..agent import guard
from ..routing import is_ollama

log = logging.getLogger("bankml.server")


def split_host_port(hp: str):
    """net.SplitHostPort: (host, port), or (None, None) where Go's reports an error."""
    if hp.startswith("["):
        end = hp.find("]")
        if end < 0 or not hp[end + 1:].startswith(":") or ":" in hp[end + 2:]:
            return None, None
        return hp[1:end], hp[end + 2:]
    if hp.count(":") != 1:
        return None, None
    host, port = hp.split(":")
    return host, port

#: gin-contrib/cors v1.7.2 config.go: the schemas an origin without `*` must start with (DefaultSchemas, and
#: ExtensionSchemas since Ollama sets AllowBrowserExtensions)
SCHEMAS = ("http://", "https://", "chrome-extension://", "safari-extension://", "moz-extension://",
           "ms-browser-extension://")
#: envconfig.AllowedOrigins' own entries after $OLLAMA_ORIGINS (envconfig/config.go:65)
DEFAULT_ORIGINS = tuple(f"{scheme}://{host}{port}" for host in ("localhost", "127.0.0.1", "0.0.0.0")
                        for port, scheme in (("", "http"), ("", "https"), (":*", "http"), (":*", "https"))) + (
    "app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*")
#: cors.DefaultConfig's AllowMethods, Ollama's AllowHeaders, MaxAge 12 h; as utils.go writes them (methods upper
#: case, headers in Go's canonical form, joined by commas)
ALLOW_METHODS = b"GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS"
ALLOW_HEADERS = ",".join(
    "-".join(w.capitalize() for w in h.split("-")) for h in (
        "Authorization", "Content-Type", "User-Agent", "Accept", "X-Requested-With", "OpenAI-Beta",
        "x-stainless-arch", "x-stainless-async", "x-stainless-custom-poll-interval", "x-stainless-helper-method",
        "x-stainless-lang", "x-stainless-os", "x-stainless-package-version", "x-stainless-poll-helper",
        "x-stainless-retry-count", "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-timeout",
    )).encode()
MAX_AGE = b"43200"


class Origins:
    """The origins Ollama's cors middleware allows, from the AllowOrigins list as written (cors.go:117 Validate,
    :143 parseWildcardRules; config.go:42 newCors, :125 validateOrigin, :101 validateWildcardOrigin)."""

    def __init__(self, entries: list[str]):
        for entry in entries:
            if "*" not in entry and not entry.startswith(SCHEMAS):
                raise ValueError("bad origin: origins must contain '*' or include " + ",".join(SCHEMAS))
        self.any = "*" in entries
        self.exact = {e.strip().lower() for e in entries}      # utils.go normalize
        self.wild = []                                         # (prefix, suffix), read from the entries as written
        for entry in entries:
            if "*" in entry:
                if entry.count("*") > 1:
                    raise ValueError("only one * is allowed")
                i = entry.index("*")
                self.wild.append(("*", entry[1:]) if i == 0 else (entry[:i], "*") if i == len(entry) - 1
                                 else (entry[:i], entry[i + 1:]))

    def allows(self, origin: str) -> bool:
        if self.any or origin in self.exact:
            return True
        for prefix, suffix in self.wild:
            if (prefix == "*" and origin.endswith(suffix) or suffix == "*" and origin.startswith(prefix)
                    or origin.startswith(prefix) and origin.endswith(suffix)):
                return True
        return False


class _Nothing:
    """A list Ollama would not start with: no origin is allowed."""
    any = False

    @staticmethod
    def allows(origin: str) -> bool:
        return False


def origins(environ=None) -> Origins:
    """envconfig.AllowedOrigins over $OLLAMA_ORIGINS; raises ValueError, naming the variable and Ollama's reason,
    where Ollama refuses to start."""
    return _parsed(_value(environ))


def _value(environ=None) -> str:
    # envconfig.Var: trimmed of blanks, then of quotes
    return (os.environ if environ is None else environ).get("OLLAMA_ORIGINS", "").strip().strip("\"'")


@functools.lru_cache(maxsize=8)
def _parsed(value: str) -> Origins:
    try:
        return Origins((value.split(",") if value else []) + list(DEFAULT_ORIGINS))
    except ValueError as e:
        raise ValueError(f"OLLAMA_ORIGINS={value!r}: {e}") from None


@functools.lru_cache(maxsize=8)
def _usable(value: str):
    try:
        return _parsed(value)
    except ValueError as e:
        log.warning("%s (Ollama would not start); every cross-origin request to Ollama's routes is refused", e)
        return _Nothing()


@dataclass
class Verdict:
    """What Ollama's middlewares answer: `status` (403 or 204) is an answer now, headers only, no body; None
    lets the request go on, with `headers` added to its answer."""
    status: int | None = None
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)

    async def send(self, send) -> None:
        """The answer now: `status`, no body (Go's server: Content-Length: 0 on the 403, none on a 204). `headers`
        are the caller's to add, as on any answer of the request (bankml.server.http.LlamaHTTP adds them)."""
        hs = [(b"content-length", b"0")] if self.status != 204 else []
        await send({"type": "http.response.start", "status": self.status, "headers": hs})
        await send({"type": "http.response.body", "body": b""})


def verdict(scope) -> Verdict | None:
    """Ollama's answer to a request on an Ollama path (see the module doc); None on any other path."""
    if not is_ollama(scope.get("path", "")):
        return None
    origin, host = _first(scope, b"origin"), _first(scope, b"host")
    method = scope.get("method")
    headers: list[tuple[bytes, bytes]] = []
    if origin and origin not in ("http://" + host, "https://" + host):
        allowed = _usable(_value())
        if not allowed.allows(origin):
            return Verdict(403)
        # the headers as Go writes them: sorted by name (net/http Header.Write)
        acao = [(b"access-control-allow-origin", b"*" if allowed.any else origin.encode("latin-1"))]
        vary = [] if allowed.any else [(b"vary", b"Origin")]
        if method == "OPTIONS":
            if vary:
                vary += [(b"vary", b"Access-Control-Request-Method"), (b"vary", b"Access-Control-Request-Headers")]
            return Verdict(204, [(b"access-control-allow-headers", ALLOW_HEADERS),
                                 (b"access-control-allow-methods", ALLOW_METHODS)] + acao
                           + [(b"access-control-max-age", MAX_AGE)] + vary)
        headers = acao + vary
    if _loopback_listener(scope):
        name = _host_of(host)
        ip = guard.parse_ip(name)
        if ip is not None and guard.ip_allowed(ip):
            return Verdict(None, headers)
        if not guard.name_allowed(name):
            return Verdict(403, headers)        # the cors headers already set stay on the refusal
        if method == "OPTIONS":
            return Verdict(204, headers)
    return Verdict(None, headers)


def _first(scope, name: bytes) -> str:
    # Go's Header.Get: the first value; a request without one reads as ""
    for k, v in scope.get("headers", []):
        if k.lower() == name:
            return v.decode("latin-1")
    return ""


def _host_of(host: str) -> str:
    """allowedHostsMiddleware's host: net.SplitHostPort's, or the whole Host when Go reports an error."""
    name, _ = split_host_port(host)
    return host if name is None else name


def _loopback_listener(scope) -> bool:
    local = scope.get("server")
    if not local:
        return False
    ip, port = guard.parse_ip(str(local[0])), local[1]
    if ip is None:
        return False
    listeners = getattr(getattr(scope.get("app"), "state", None), "listeners", None)
    if listeners:
        bound = [guard.parse_ip(str(h)) for h, p in listeners if p == port]
        if ip not in bound:
            wild = [b for b in bound if b is not None and b.is_unspecified]
            if wild:
                ip = wild[0]
    return ip.is_loopback
