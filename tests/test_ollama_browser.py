"""Ollama's routes (`/`, `/api/...`) behind Ollama v0.13.3's own browser rules (bankml.server.ollama.cors;
docs/ollama.md, "Browser and Host rules"; docs/security.md).

Before, bankml's Ollama routes answered under llama-server's CORS (default `*` with credentials: any Origin
reflected, every preflight 200) and no Host check, so a page on any site could delete, copy or create models
and upload blobs. Ollama v0.13.3 (server/routes.go:1462 GenerateRoutes) puts gin-contrib/cors v1.7.2 (its
AllowOrigins: envconfig.AllowedOrigins, envconfig/config.go:60) and allowedHostsMiddleware (routes.go:1423) in front of
every route; bankml now does the same on both its listeners.

The attacker's cases run over real HTTP on a bankml-serve subprocess that also listens on Ollama's address
(OLLAMA_HOST set to a free loopback port), with OLLAMA_ORIGINS naming one extra origin; the rules' matrix
(wildcards, `*`, a bad OLLAMA_ORIGINS, listeners that are not loopback) runs in-process without a model.
"""

from __future__ import annotations

import socket

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

import ollama_serve as osv
import server_replay as sr
from test_agent_guard import raw_exchange as exchange
from bankml.server.flags import parse_flags

EVIL = "http://evil.example"
APP = "https://app.example"                 # the server's OLLAMA_ORIGINS
#: gin-contrib/cors v1.7.2 utils.go generatePreflightHeaders over Ollama's AllowHeaders (routes.go:1465)
ALLOW_HEADERS = ("Authorization,Content-Type,User-Agent,Accept,X-Requested-With,Openai-Beta,X-Stainless-Arch,"
                 "X-Stainless-Async,X-Stainless-Custom-Poll-Interval,X-Stainless-Helper-Method,X-Stainless-Lang,"
                 "X-Stainless-Os,X-Stainless-Package-Version,X-Stainless-Poll-Helper,X-Stainless-Retry-Count,"
                 "X-Stainless-Runtime,X-Stainless-Runtime-Version,X-Stainless-Timeout")
ALLOW_METHODS = "GET,POST,PUT,PATCH,DELETE,HEAD,OPTIONS"      # cors.DefaultConfig (cors.go:176)


def cors_of(headers: list) -> list:
    """The CORS lines of an answer (Access-Control-*, Vary), in order."""
    return [(k, v) for k, v in headers if k.startswith("access-control-") or k == "vary"]


def preflight_lines(origin: str) -> list:
    # gin-contrib/cors config.go:70 applyCors + handlePreflight: the preflight headers and the Origin, in the order Go
    # writes them (sorted by name)
    return [("access-control-allow-headers", ALLOW_HEADERS), ("access-control-allow-methods", ALLOW_METHODS),
            ("access-control-allow-origin", origin), ("access-control-max-age", "43200"), ("vary", "Origin"),
            ("vary", "Access-Control-Request-Method"), ("vary", "Access-Control-Request-Headers")]


@pytest.fixture(scope="module")
def server(tmp_path_factory, smollm2_path):
    ollama_port = sr.free_port()
    with osv.serve(tmp_path_factory.mktemp("models"), env={
            "OLLAMA_HOST": f"127.0.0.1:{ollama_port}", "OLLAMA_ORIGINS": APP}) as srv:
        yield srv, ollama_port


def ports(server):
    srv, ollama_port = server
    return (srv.port, ollama_port)         # the main listener and Ollama's: the same rules on both


def model_names(port: int) -> set:
    r = osv.call(port, "GET", "/api/tags")
    assert r.status == 200
    return {m["name"] for m in r.json()["models"]}


# ---------------------------------------------------------------- the attacker's requests, over HTTP

def test_a_cross_site_delete_leaves_the_model_there(server):
    main_port, _ = ports(server)
    r = osv.call(main_port, "POST", "/api/create", {"model": "victim", "from": osv.MODEL, "system": "hi",
                                                    "stream": False})
    assert (r.status, r.json()) == (200, {"status": "success"})
    for port in ports(server):
        # routes.go:1492 cors.New: a disallowed Origin is AbortWithStatus(403) (config.go:85 applyCors): no body
        status, headers, body = exchange(port, "DELETE", "/api/delete", {
            "Host": f"127.0.0.1:{port}", "Origin": EVIL, "Content-Type": "application/json"},
            b'{"model":"victim"}')
        assert (status, body, cors_of(headers)) == (403, b"", []), port
        assert dict(headers)["content-length"] == "0"
        # the other writes, as a page's "simple" POSTs (text/plain: no preflight) would send them
        for path, payload in (("/api/copy", b'{"source":"victim","destination":"stolen"}'),
                              ("/api/create", b'{"model":"planted","from":"victim"}')):
            status, headers, body = exchange(port, "POST", path, {
                "Host": f"127.0.0.1:{port}", "Origin": EVIL, "Content-Type": "text/plain"}, payload)
            assert (status, body, cors_of(headers)) == (403, b"", []), (port, path)
        assert {"victim:latest"} <= model_names(port) and not {"stolen:latest", "planted:latest"} & model_names(port)
    # the same DELETE without a browser's Origin (the ollama client's) still deletes
    status, _, body = exchange(main_port, "DELETE", "/api/delete", {
        "Host": f"127.0.0.1:{main_port}", "Content-Type": "application/json"}, b'{"model":"victim"}')
    assert (status, body) == (200, b"") and "victim:latest" not in model_names(main_port)


def test_a_foreign_preflight_is_refused(server):
    for port in ports(server):
        status, headers, body = exchange(port, "OPTIONS", "/api/delete", {
            "Host": f"127.0.0.1:{port}", "Origin": EVIL, "Access-Control-Request-Method": "DELETE",
            "Access-Control-Request-Headers": "content-type"})
        assert (status, body, cors_of(headers)) == (403, b"", []), port


def test_an_allowed_preflight_gets_ollamas_answer(server):
    for port in ports(server):
        for origin in ("http://localhost:5173", APP):
            status, headers, body = exchange(port, "OPTIONS", "/api/delete", {
                "Host": f"127.0.0.1:{port}", "Origin": origin, "Access-Control-Request-Method": "DELETE"})
            # config.go:90 applyCors: the preflight is answered at once (OptionsResponseStatusCode 204), no body
            assert (status, body) == (204, b""), (port, origin)
            assert cors_of(headers) == preflight_lines(origin)
            assert "content-length" not in dict(headers) and "access-control-allow-credentials" not in dict(headers)


def test_a_foreign_host_on_a_loopback_listener(server):
    for port in ports(server):
        # DNS rebinding: evil.example resolves to 127.0.0.1; no Origin (a GET), or the page's own origin, which
        # gin-contrib/cors lets through as same-origin; allowedHostsMiddleware refuses the Host (routes.go:1457)
        for extra in ({}, {"Origin": f"http://evil.example:{port}"}):
            status, headers, body = exchange(port, "GET", "/api/tags", {"Host": f"evil.example:{port}"} | extra)
            assert (status, body, cors_of(headers)) == (403, b"", []), (port, extra)
            status, _, body = exchange(port, "POST", "/api/copy", {
                "Host": f"evil.example:{port}", "Content-Type": "application/json"} | extra,
                b'{"source":"%s","destination":"stolen"}' % osv.MODEL.encode())
            assert (status, body) == (403, b"")
        assert "stolen:latest" not in model_names(port)
        # the machine's names pass; an OPTIONS from one is answered 204 at once (routes.go:1449), from an IP it
        # goes on to gin's router (405: no OPTIONS route)
        for host in ("localhost", f"localhost:{port}", "app.localhost", socket.gethostname(), "[::1]:1",
                     "192.168.1.9", "0.0.0.0:1"):
            assert exchange(port, "GET", "/api/version", {"Host": host})[0] == 200, host
        assert exchange(port, "OPTIONS", "/api/tags", {"Host": f"localhost:{port}"})[:3:2] == (204, b"")
        assert exchange(port, "OPTIONS", "/api/tags", {"Host": f"127.0.0.1:{port}"})[:3:2] == (
            405, b"405 method not allowed")


def test_ollama_origins_allows_one(server):
    for port in ports(server):
        status, headers, body = exchange(port, "POST", "/api/show", {
            "Host": f"127.0.0.1:{port}", "Origin": APP, "Content-Type": "application/json"},
            b'{"model":"%s"}' % osv.MODEL.encode())
        assert status == 200 and b'"modelfile"' in body
        # config.go applyCors, handleNormal (Vary: Origin) and the Origin itself; never credentials
        assert cors_of(headers) == [("access-control-allow-origin", APP), ("vary", "Origin")]
        for other in ("https://app.example.evil", "http://app.example", "https://APP.example"):
            assert exchange(port, "GET", "/api/version", {"Host": "localhost", "Origin": other})[0] == 403, other


def test_the_local_origins_are_allowed(server):
    for port in ports(server):
        # envconfig.AllowedOrigins: http(s)://localhost, 127.0.0.1, 0.0.0.0 with or without a port, app://,
        # file://, tauri://, vscode-webview://, vscode-file://
        for origin in ("http://localhost", "https://localhost:3000", "http://127.0.0.1:8080", "https://127.0.0.1",
                       "http://0.0.0.0:9", "app://-", "file://", "tauri://localhost", "vscode-webview://abc",
                       "vscode-file://vscode-app"):
            status, headers, body = exchange(port, "GET", "/api/version", {
                "Host": f"127.0.0.1:{port}", "Origin": origin})
            assert (status, body) == (200, b'{"version":"0.13.3"}'), origin
            assert cors_of(headers) == [("access-control-allow-origin", origin), ("vary", "Origin")], origin
        # not in Ollama's list: [::1], browser extensions (AllowBrowserExtensions only lets the list name them),
        # "null" (a sandboxed page), another scheme, a name that only starts like localhost
        for origin in ("http://[::1]:3000", "chrome-extension://abcdef", "null", "ftp://localhost",
                       "http://localhost.evil.example", "HTTP://LOCALHOST"):
            status, headers, body = exchange(port, "GET", "/", {"Host": f"127.0.0.1:{port}", "Origin": origin})
            assert (status, body, cors_of(headers)) == (403, b"", []), origin


def test_no_origin_is_no_cors_request(server):
    for port in ports(server):
        status, headers, body = exchange(port, "GET", "/", {"Host": f"127.0.0.1:{port}"})
        assert (status, body, cors_of(headers)) == (200, b"Ollama is running", [])
        status, headers, body = exchange(port, "GET", "/", {"Host": f"127.0.0.1:{port}", "Origin": ""})
        assert (status, cors_of(headers)) == (200, [])


def test_llama_server_routes_keep_llama_servers_cors(server):
    # only Ollama's paths changed: /health is llama-server's, whose default reflects any Origin
    for port in ports(server):
        status, headers, _ = exchange(port, "GET", "/health", {"Host": f"127.0.0.1:{port}", "Origin": EVIL})
        assert status == 200 and dict(headers)["access-control-allow-origin"] == EVIL
        status, headers, _ = exchange(port, "OPTIONS", "/v1/chat/completions", {
            "Host": f"evil.example:{port}", "Origin": EVIL})
        assert status == 200 and dict(headers)["access-control-allow-origin"] == EVIL


# ---------------------------------------------------------------- the rules, in-process

def app_client(*flags: str, base: str = "http://127.0.0.1:11434", listeners=None) -> TestClient:
    """Ollama's model-free routes (`/`, /api/version) and llama-server's middleware (bankml.server.http.LlamaHTTP)
    under `flags`; `base` is the address the request arrives on (scope["server"]) and its default Host;
    `listeners`: the addresses bankml-serve bound (app.state.listeners), None for an app served elsewhere."""
    from bankml.server.api import ollama as ollama_api
    from bankml.server.app import _no_route
    from bankml.server.http import LlamaHTTP
    from bankml.server.ollama import cors
    cfg = parse_flags(list(flags))
    app = Starlette(routes=ollama_api.routes[:2], exception_handlers={404: _no_route, 405: _no_route})
    app.state.cfg = cfg
    if listeners is not None:
        app.state.listeners = listeners
    app.add_middleware(LlamaHTTP, cfg=cfg, browser_gate=cors.verdict)
    return TestClient(app, base_url=base)


def status_of(c: TestClient, origin: str | None, method: str = "GET", **headers) -> int:
    return c.request(method, "/api/version", headers=({"origin": origin} if origin is not None else {}) | headers
                     ).status_code


def test_ollama_origins_reading(monkeypatch):
    c = app_client()
    # envconfig.Var trims blanks and quotes; the list is split on commas; gin-contrib/cors compares the plain
    # ones trimmed and lower-cased (utils.go normalize) but reads its wildcards as written (cors.go
    # parseWildcardRules), so a wildcard after ", " never matches
    monkeypatch.setenv("OLLAMA_ORIGINS", "'https://A.example,http://*.corp.example, http://*.y'")
    for origin in ("https://a.example", "http://app.corp.example", "http://.corp.example"):
        assert status_of(c, origin) == 200, origin
    for origin in ("https://A.example", "https://corp.example", "http://a.y", "http://app.corp.example.evil"):
        assert status_of(c, origin) == 403, origin
    monkeypatch.setenv("OLLAMA_ORIGINS", "https://*")
    assert status_of(c, "https://anything") == 200 and status_of(c, "http://anything") == 403
    monkeypatch.setenv("OLLAMA_ORIGINS", "*.example")            # a leading wildcard: a suffix
    assert status_of(c, "https://a.example") == 200 and status_of(c, "https://a.example:1") == 403


def test_ollama_origins_star(monkeypatch):
    # "*" in the list: AllowAllOrigins (config.go:42 newCors): `Access-Control-Allow-Origin: *`, no Vary, no echo
    monkeypatch.setenv("OLLAMA_ORIGINS", "*")
    c = app_client()
    r = c.get("/api/version", headers={"origin": EVIL})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*" and "vary" not in r.headers
    r = c.options("/api/version", headers={"origin": EVIL})
    assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "*"
    assert r.headers["access-control-allow-methods"] == ALLOW_METHODS and "vary" not in r.headers


def test_a_bad_ollama_origins_refuses_every_cross_origin_request(monkeypatch, caplog):
    # Ollama panics at startup on an entry without a scheme or with two wildcards (cors.go Validate,
    # parseWildcardRules); bankml serves its other routes and refuses every Origin on Ollama's, saying why
    from bankml.server.ollama import cors
    for value, why in (("app.example", "bad origin: origins must contain '*' or include http://,https://,"
                                       "chrome-extension://,safari-extension://,moz-extension://,"
                                       "ms-browser-extension://"),
                       ("http://*.*.example", "only one * is allowed"), ("https://a.example,", "bad origin"),
                       ("https://a.example, https://b.example", "bad origin")):
        monkeypatch.setenv("OLLAMA_ORIGINS", value)
        with pytest.raises(ValueError, match="OLLAMA_ORIGINS") as e:
            cors.origins()
        assert why in str(e.value)
        c = app_client()
        assert status_of(c, "http://localhost") == 403 and status_of(c, None) == 200
    monkeypatch.setenv("OLLAMA_ORIGINS", "chrome-extension://abc")  # a browser extension may be named
    assert status_of(app_client(), "chrome-extension://abc") == 200


def test_the_host_rule_follows_the_listener():
    # allowedHostsMiddleware (routes.go:1430): only a listener bound to a loopback address checks the Host
    assert status_of(app_client(), None, host="evil.example") == 403
    assert status_of(app_client(base="http://[::1]:11434"), None, host="evil.example") == 403
    assert status_of(app_client(base="http://192.168.7.7:11434"), None, host="evil.example") == 200
    # bankml-serve records what it bound: a loopback connection to a 0.0.0.0 listener is not checked (the
    # guard of /tools checks it; Ollama does not), a 127.0.0.1 listener beside it on the same port is
    wild = [("0.0.0.0", 11434)]
    assert status_of(app_client(listeners=wild), None, host="evil.example") == 200
    both = [("127.0.0.1", 11434), ("::", 11434)]
    assert status_of(app_client(listeners=both), None, host="evil.example") == 403
    assert status_of(app_client(base="http://10.0.0.5:11434", listeners=both), None, host="evil.example") == 200
    # Go's net.SplitHostPort: "[::1]" without a port is not an address, and not a name either
    assert status_of(app_client(), None, host="[::1]") == 403
    assert status_of(app_client(), None, host="::1") == 200
    # a name is Ollama's only: --host names are the /tools guard's addition
    assert status_of(app_client("--host", "myalias"), None, host="myalias") == 403
    # a preflight from an allowed Origin is answered before the Host is looked at (the cors middleware aborts)
    assert status_of(app_client(), "http://localhost", "OPTIONS", host="evil.example") == 204


def test_the_api_key_is_asked_after_the_browser_rules():
    c = app_client("--api-key", "k")
    assert status_of(c, "http://localhost", "OPTIONS") == 204         # a preflight carries no key
    assert status_of(c, EVIL) == 403 and status_of(c, "http://localhost") == 401
    assert status_of(c, "http://localhost", authorization="Bearer k") == 200
