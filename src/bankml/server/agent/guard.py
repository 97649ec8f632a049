"""The browser guard of /tools and /cors-proxy (issue 19, findings 5 and 6; docs/security.md).

llama-server b11192 serves both routes to any request its CORS layer lets through: CORS only decides whether a
page may *read* an answer, so a foreign page's "simple" request (no preflight) still runs a tool, and a page whose
name was rebound to 127.0.0.1 (DNS rebinding) is same-origin for the browser. `refusal(request, route)` is the
one check both routes make once their feature is on and before they read a body, run a tool or open a
connection; it answers None (go on) or a 403 in llama-server's error shape naming the rule and the flag that
opens it. The rules, in this order:

1. Host (on a loopback connection only): Ollama v0.13.3's allowedHostsMiddleware / allowedHost
   (server/routes.go:1423 / :1396, isLocalIP :1375): the Host header's name (port dropped) must be empty, `localhost`, the machine's host
   name, a name under `.localhost`, `.local` or `.internal`, an IP literal that is loopback, private (Go's
   IsPrivate), unspecified or one of this machine's, or (bankml) a `--host` name. A request that arrived on a
   non-loopback address is not checked, as Ollama does not check a non-loopback listener.
2. Origin: when present (and not empty) it must be allowed by --cors-origins: given `*` anything, given `localhost` or not given
   at all (the default of both routes, whatever the server-wide CORS default) a localhost origin
   (`http` or `https` :// `localhost`, `127.0.0.1` or `[::1]`, any port: llama-server's origin_is_localhost,
   tools/server/server-http.cpp:74 (b11192)), otherwise one of the comma-separated origins (compared without
   case and trailing slash). Ollama refuses a disallowed Origin with 403 too (gin-contrib/cors v1.7.2 config.go applyCors).
3. Sec-Fetch-Site: a request without Origin that the browser marks `cross-site` (an <img> or <script src>
   from another site: no-cors GETs carry no Origin) is refused unless --cors-origins is `*`.
4. Content type (POST /tools with a body): `application/json` only, so a call is never a CORS "simple" request
   (text/plain, form types or none: no preflight, sent by any page).

`--agent-open` (bankml's flag, ServerConfig.agent_open) turns the guard off: llama-server's behaviour.

`withholds_cors(scope, cfg)` tells llama-server's CORS layer (bankml.server.http.LlamaHTTP) to leave its headers
off an answer of these routes whose Origin the guard refuses: at its default it would reflect that Origin on the
403 and on a preflight. `ip_allowed` and `name_allowed` are Ollama's Host rule itself, which
bankml.server.ollama.cors applies on Ollama's routes over Go's reading of the Host.

It knows the request's headers, the address it arrived on (scope["server"]) and ServerConfig's CORS and host
fields; it must not know what the routes do with the request.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket

from starlette.requests import Request
from starlette.responses import Response

from ..http import error_response

log = logging.getLogger("bankml.server")

#: Ollama's allowedHost: names under these are the machine's own (server/routes.go, v0.13.3)
LOCAL_SUFFIXES = (".localhost", ".local", ".internal")
#: Go's netip.Addr.IsPrivate (RFC 1918, RFC 4193)
PRIVATE_NETS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))
_LOCAL_ORIGIN = re.compile(r"https?://(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]+)?")
_OPEN = "--agent-open restores llama-server's behaviour"


def refusal(request: Request, route: str) -> Response | None:
    """None when `request` may reach `route` ("/tools" or "/cors-proxy"), else the 403 answer."""
    cfg = request.app.state.cfg
    if getattr(cfg, "agent_open", False):
        return None
    why = (_host_refusal(request, cfg) or _origin_refusal(request, cfg)
           or (_content_type_refusal(request) if route == "/tools" and request.method == "POST" else None))
    if why is None:
        return None
    log.warning("%s %s refused: %s", request.method, route, why.split(";")[0])
    return error_response(f"{route} refused: {why}", 403)


# ---------------------------------------------------------------- Host

def _host_refusal(request: Request, cfg) -> str | None:
    if not loopback_connection(request.scope):
        return None
    values = _values(request.scope, b"host")
    for value in values or [""]:
        if not host_allowed(value, cfg):
            return (f"the Host \"{value}\" is not a name of this machine (a page whose name points at a loopback "
                    "address: DNS rebinding); use localhost or 127.0.0.1, or bind --host to that name; " + _OPEN)
    return None


def loopback_connection(scope) -> bool:
    """Whether the request arrived on a loopback address (a UNIX socket or an unknown address: no)."""
    server = scope.get("server")
    if not server:
        return False
    ip = parse_ip(str(server[0]))
    return ip is not None and ip.is_loopback


def host_name(value: str) -> str:
    """The name of a Host header, lower-cased, without its port: `[::1]:8080` -> `::1`, `a:1` -> `a`; a value
    with more colons is an IPv6 literal without brackets; a bracket with anything but `:port` after it stays as
    it was (no IP, no name)."""
    v = value.strip().lower()
    if v.startswith("["):
        close = v.find("]")
        rest = v[close + 1:] if close > 0 else "x"
        if rest == "" or (rest.startswith(":") and rest[1:].isdigit()):
            return v[1:close]
        return v
    if v.count(":") == 1:
        return v.split(":", 1)[0]
    return v


def host_allowed(value: str, cfg) -> bool:
    """The guard's rule for the Host of a request on a loopback connection: Ollama's (ip_allowed, name_allowed)
    over host_name's reading, or a --host name (see the module doc)."""
    name = host_name(value)
    ip = parse_ip(name)
    if ip is not None:
        return ip_allowed(ip)
    return name_allowed(name) or name in {h.strip().lower() for h in cfg.hostnames}


def ip_allowed(ip) -> bool:
    """Ollama's allowedHostsMiddleware on a Host that is an IP literal (server/routes.go:1441, v0.13.3):
    loopback, private, unspecified or one of this machine's."""
    return ip.is_loopback or ip.is_unspecified or any(ip in n for n in PRIVATE_NETS) or _is_local_ip(ip)


def name_allowed(name: str) -> bool:
    """Ollama's allowedHost (server/routes.go:1396, v0.13.3): empty, `localhost`, this machine's host name, or a
    name under .localhost, .local or .internal (compared without case)."""
    name = name.lower()
    if name in ("", "localhost") or name.endswith(LOCAL_SUFFIXES):
        return True
    try:
        return name == socket.gethostname().lower()
    except OSError:
        return False


def parse_ip(text: str):
    """An IP literal as an ipaddress object (an IPv4-mapped IPv6 one as its IPv4 address), else None."""
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped if mapped is not None else ip


def _is_local_ip(ip) -> bool:
    """Ollama's isLocalIP: an address of one of this machine's interfaces (one that a socket can bind to)."""
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((str(ip), 0))
        return True
    except OSError:
        return False


# ---------------------------------------------------------------- Origin and Sec-Fetch-Site

def _origin_refusal(request: Request, cfg) -> str | None:
    origins = _origins(request.scope)
    for origin in origins:
        if not origin_allowed(origin, cfg):
            allowed = ("localhost origins only, the default with --tools or --ui-mcp-proxy"
                       if not cfg.cors_origins_explicit else f"\"{cfg.cors_origins}\"")
            return (f"the request's Origin \"{origin}\" is not allowed by --cors-origins ({allowed}); name it in "
                    "--cors-origins to allow it; " + _OPEN)
    if not origins and _values(request.scope, b"sec-fetch-site")[:1] == ["cross-site"] and not _any_origin(cfg):
        return ("a cross-site request without Origin (Sec-Fetch-Site: cross-site, e.g. an <img> or <script> of "
                "another site); --cors-origins \"*\" allows it; " + _OPEN)
    return None


def _origins(scope) -> list[str]:
    return [o for o in _values(scope, b"origin") if o.strip()]     # empty: none (llama-server's reading)


def withholds_cors(scope, cfg) -> bool:
    """Whether llama-server's CORS layer (bankml.server.http.LlamaHTTP) must leave its headers off this answer:
    a request to /tools or /cors-proxy, the route's feature on and the guard on, with an Origin the guard does not
    allow. That layer reflects any Origin at its default (`*` with credentials); on these routes it never
    reflects one the guard refuses, neither on the 403 nor on a preflight (issue 19: "never reflect an arbitrary
    Origin on the proxy")."""
    path = scope.get("path")
    on = bool(cfg.server_tools) if path == "/tools" else path == "/cors-proxy" and cfg.ui_mcp_proxy
    if not on or getattr(cfg, "agent_open", False):
        return False
    return any(not origin_allowed(origin, cfg) for origin in _origins(scope))


def _any_origin(cfg) -> bool:
    return cfg.cors_origins_explicit and cfg.cors_origins.strip() == "*"


def origin_is_localhost(origin: str) -> bool:
    """http(s)://localhost, 127.0.0.1 or [::1], any port, nothing else (no path, no user)."""
    return _LOCAL_ORIGIN.fullmatch(origin.strip().lower()) is not None


def origin_allowed(origin: str, cfg) -> bool:
    """Whether --cors-origins allows `origin` on /tools and /cors-proxy (see the module doc)."""
    spec = cfg.cors_origins.strip() if cfg.cors_origins_explicit else "localhost"
    if spec == "*":
        return True
    if spec == "localhost":
        return origin_is_localhost(origin)
    want = {o.strip().lower().rstrip("/") for o in spec.split(",") if o.strip()}
    return origin.strip().lower().rstrip("/") in want


# ---------------------------------------------------------------- Content-Type

def _content_type_refusal(request: Request) -> str | None:
    headers = request.headers
    has_body = headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers
    ctype = headers.get("content-type")
    if not has_body or (ctype is not None and ctype.split(";")[0].strip().lower() == "application/json"):
        return None
    got = f"\"{ctype}\"" if ctype is not None else "none"
    return (f"a tool call needs Content-Type: application/json (got {got}), so that a browser must ask first "
            "(a CORS preflight) before it sends one; " + _OPEN)


def _values(scope, name: bytes) -> list[str]:
    return [v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == name]
