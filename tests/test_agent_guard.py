"""Issue 19, findings 5 and 6: /tools and /cors-proxy are not reachable from a browser on a foreign site
(bankml.server.agent.guard; docs/security.md).

- Finding 5: a cross-origin "simple" request (`Origin: http://evil.example`, `Content-Type: text/plain`, no
  preflight) to `POST /tools` ran exec_shell_command; a foreign `Host` (DNS rebinding) too. A marker file the
  command would create proves it did not run.
- Finding 6: with `--ui-mcp-proxy` and the default CORS, `Origin: http://evil.example` read an internal URL
  through /cors-proxy with its Origin reflected. The target server records every request it gets: it gets none.

Both findings are reproduced over real HTTP on a bankml-serve subprocess (tests/server_replay.BankmlServe), as the
issue states them; the rules' matrix (the allowed cases, --cors-origins, --agent-open, the Host rule) runs on the
two routes in-process, without a model.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

import server_replay as sr
from bankml.server.flags import parse_flags
from proxy_target import Target

EVIL = "http://evil.example"


def raw_exchange(port: int, method: str, path: str, headers: dict, body: bytes = b"") -> tuple[int, list, bytes]:
    """One HTTP/1.1 request with exactly these headers (Host included: a browser after DNS rebinding sends the
    attacker's name); the status, the header lines [(lower-case name, value)] in order, and the body."""
    head = f"{method} {path} HTTP/1.1\r\nConnection: close\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(head.encode() + b"\r\n" + body)
        data = bytearray()
        while chunk := s.recv(1 << 16):
            data += chunk
    status, hs, payload = sr.parse_http(bytes(data))
    return status, [(k.lower(), v) for k, v in hs], payload


def raw_request(port: int, method: str, path: str, headers: dict, body: bytes = b"") -> tuple[int, dict, bytes]:
    """raw_exchange with the headers as a dict."""
    status, hs, payload = raw_exchange(port, method, path, headers, body)
    return status, dict(hs), payload


def shell_call(marker) -> bytes:
    return json.dumps({"tool": "exec_shell_command", "params": {"command": f"touch {marker}"}}).encode()


# ---------------------------------------------------------------- finding 5, over HTTP

@pytest.fixture(scope="module")
def tools_server(smollm2_path):
    with sr.BankmlServe(["-m", str(smollm2_path), "-c", "512", "-np", "1", "--tools", "all"]) as srv:
        yield srv


def test_finding5_cross_origin_simple_request_does_not_run_a_shell(tools_server, tmp_path):
    marker = tmp_path / "pwned"
    port = tools_server.port
    status, headers, body = raw_request(port, "POST", "/tools", {
        "Host": f"127.0.0.1:{port}", "Origin": EVIL, "Content-Type": "text/plain;charset=UTF-8"}, shell_call(marker))
    assert status == 403 and not marker.exists()
    err = json.loads(body)["error"]
    assert (err["code"], err["type"]) == (403, "permission_error")
    assert "Origin" in err["message"] and "--cors-origins" in err["message"] and "--agent-open" in err["message"]
    assert "access-control-allow-origin" not in headers      # --tools: llama-server's CORS default is localhost


def test_finding5_dns_rebinding_host_does_not_run_a_shell(tools_server, tmp_path):
    marker = tmp_path / "pwned"
    port = tools_server.port
    # the page of evil.example, its name now resolving to 127.0.0.1: same-origin for the browser, so a JSON
    # POST needs no preflight; the Host header is the attacker's name
    status, _, body = raw_request(port, "POST", "/tools", {
        "Host": f"evil.example:{port}", "Origin": f"{EVIL}:{port}", "Content-Type": "application/json"},
        shell_call(marker))
    assert status == 403 and not marker.exists()
    assert "Host" in json.loads(body)["error"]["message"]
    status, _, body = raw_request(port, "POST", "/tools", {
        "Host": f"evil.example:{port}", "Content-Type": "application/json"}, shell_call(marker))
    assert status == 403 and not marker.exists()


def test_finding5_a_text_plain_call_without_origin_is_refused_too(tools_server, tmp_path):
    # a browser's no-preflight POST may leave Origin out only where no browser is involved, but the content type
    # alone must keep a simple request from running a tool
    marker = tmp_path / "pwned"
    port = tools_server.port
    for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
        hs = {"Host": f"127.0.0.1:{port}"} | ({"Content-Type": ctype} if ctype else {})
        status, _, body = raw_request(port, "POST", "/tools", hs, shell_call(marker))
        assert status == 403 and not marker.exists(), ctype
        assert "Content-Type" in json.loads(body)["error"]["message"]


def test_finding5_the_allowed_calls_still_run(tools_server, tmp_path):
    port = tools_server.port
    for i, extra in enumerate(({}, {"Origin": f"http://localhost:{port}"}, {"Origin": "http://127.0.0.1:3000"},
                               {"Origin": "https://[::1]"})):
        marker = tmp_path / f"ran{i}"
        status, _, body = raw_request(port, "POST", "/tools", {
            "Host": f"localhost:{port}", "Content-Type": "application/json; charset=utf-8"} | extra,
            shell_call(marker))
        assert (status, json.loads(body)) == (200, {"plain_text_response": "\n[exit code: 0]"}), extra
        assert marker.exists()


# ---------------------------------------------------------------- finding 6, over HTTP

@pytest.fixture(scope="module")
def proxy_server(smollm2_path):
    with Target() as target, sr.BankmlServe(["-m", str(smollm2_path), "-c", "512", "-np", "1",
                                             "--ui-mcp-proxy"]) as srv:
        yield srv, target


def test_finding6_a_foreign_origin_never_reads_an_internal_url(proxy_server):
    srv, target = proxy_server
    target.take()
    status, headers, body = raw_request(srv.port, "GET", f"/cors-proxy?url=http://{target.authority}/plain", {
        "Host": f"127.0.0.1:{srv.port}", "Origin": EVIL})
    assert status == 403 and target.take() == []
    err = json.loads(body)["error"]
    assert err["type"] == "permission_error" and "Origin" in err["message"] and "--cors-origins" in err["message"]
    assert "x-custom" not in headers and body != b"ok"
    # POST (a browser's simple POST: text/plain, no preflight) is refused the same way
    status, _, _ = raw_request(srv.port, "POST", f"/cors-proxy?url=http://{target.authority}/echo", {
        "Host": f"127.0.0.1:{srv.port}", "Origin": EVIL, "Content-Type": "text/plain"}, b"{}")
    assert status == 403 and target.take() == []


def test_finding6_dns_rebinding_host_is_refused(proxy_server):
    srv, target = proxy_server
    target.take()
    status, _, body = raw_request(srv.port, "GET", f"/cors-proxy?url=http://{target.authority}/plain", {
        "Host": f"evil.example:{srv.port}"})
    assert status == 403 and target.take() == [] and "Host" in json.loads(body)["error"]["message"]


def test_finding6_the_proxy_still_serves_local_pages_and_reflects_no_target_cors(proxy_server):
    srv, target = proxy_server
    target.take()
    status, headers, body = raw_request(srv.port, "GET", f"/cors-proxy?url=http://{target.authority}/json", {
        "Host": f"127.0.0.1:{srv.port}", "Origin": "http://localhost:5173"})
    assert (status, body) == (200, b'{"a":[1,2]}') and len(target.take()) == 1
    # the target's own `Access-Control-Allow-Origin: *` is dropped; what is left is the server's CORS header,
    # the allowed localhost origin
    assert headers["access-control-allow-origin"] == "http://localhost:5173"
    status, _, body = raw_request(srv.port, "GET", f"/cors-proxy?url=http://{target.authority}/plain",
                                  {"Host": f"localhost:{srv.port}"})
    assert (status, body) == (200, b"ok") and len(target.take()) == 1



def test_finding6_the_refusal_reflects_no_origin(proxy_server):
    # the guard's 403 went out through llama-server's CORS layer, which at its default (`*` with credentials)
    # reflected the refused Origin on it; a preflight from that Origin was answered with it too
    srv, target = proxy_server
    url = f"/cors-proxy?url=http://{target.authority}/plain"
    status, headers, _ = raw_request(srv.port, "GET", url, {"Host": f"127.0.0.1:{srv.port}", "Origin": EVIL})
    assert status == 403 and "access-control-allow-origin" not in headers
    status, headers, _ = raw_request(srv.port, "OPTIONS", url, {
        "Host": f"127.0.0.1:{srv.port}", "Origin": EVIL, "Access-Control-Request-Method": "GET"})
    assert status == 200 and "access-control-allow-origin" not in headers
    # the rest of the server keeps llama-server's CORS
    status, headers, _ = raw_request(srv.port, "GET", "/health", {"Host": f"127.0.0.1:{srv.port}", "Origin": EVIL})
    assert status == 200 and headers["access-control-allow-origin"] == EVIL
    assert target.take() == []


# ---------------------------------------------------------------- the rules, in-process

UNREACHABLE = "/cors-proxy?url=http://127.0.0.1:1/"


def client(*flags: str, base: str = "http://127.0.0.1:8080") -> TestClient:
    """/tools and /cors-proxy alone (no model, no middleware) under `flags`; `base` is the address the request
    arrives on (scope["server"]) and its default Host."""
    from bankml.server.agent import cors_proxy, tools
    app = Starlette(routes=tools.routes + cors_proxy.routes)
    app.state.cfg = parse_flags(list(flags))
    return TestClient(app, base_url=base)


def ran(c: TestClient, tmp_path, headers: dict, content_type: str | None = "application/json") -> bool:
    """Whether a POST /tools exec_shell_command ran (its marker file), with these headers; a refusal is a 403."""
    marker = tmp_path / f"m{len(os.listdir(tmp_path))}"
    hs = dict(headers) | ({"content-type": content_type} if content_type else {})
    r = c.post("/tools", content=shell_call(marker), headers=hs)
    assert r.status_code == (200 if marker.exists() else 403), (r.status_code, r.text)
    return marker.exists()


def proxied(c: TestClient, headers: dict) -> bool:
    """Whether /cors-proxy tried the target (it is unreachable: 500 proxy error) rather than refusing (403)."""
    r = c.get(UNREACHABLE, headers=headers)
    assert r.status_code in (403, 500), r.text
    return r.status_code == 500 and b"proxy error: Could not establish connection" in r.content


LOCAL_ORIGINS = ("http://localhost", "https://localhost:3000", "http://127.0.0.1:1", "http://[::1]:8080",
                 "HTTP://LocalHost:80")
FOREIGN_ORIGINS = (EVIL, "null", "http://localhost.evil.example", "http://127.0.0.2:8080", "ftp://localhost",
                   "http://evil.example/http://localhost", "http://localhost:80@evil.example", "file://")


@pytest.mark.parametrize("flags", [("--tools", "all"), ("--agent",)])
def test_default_origins_are_localhost_only(flags, tmp_path):
    c = client(*flags)
    assert ran(c, tmp_path, {}) and ran(c, tmp_path, {"origin": ""})   # an empty Origin is none, as llama-server reads it
    for origin in LOCAL_ORIGINS:
        assert ran(c, tmp_path, {"origin": origin}), origin
    for origin in FOREIGN_ORIGINS:
        assert not ran(c, tmp_path, {"origin": origin}), origin
    assert c.get("/tools", headers={"origin": EVIL}).status_code == 403
    assert c.get("/tools", headers={"origin": "http://localhost:1"}).status_code == 200


def test_proxy_alone_also_defaults_to_localhost_origins():
    c = client("--ui-mcp-proxy")          # llama-server's CORS default stays "*" here; the guard's does not
    assert proxied(c, {}) and proxied(c, {"origin": "http://127.0.0.1:5173"})
    for origin in FOREIGN_ORIGINS:
        assert not proxied(c, {"origin": origin}), origin


def test_configured_cors_origins(tmp_path):
    c = client("--tools", "all", "--ui-mcp-proxy", "--cors-origins", "https://app.example, http://b.example:81")
    for origin in ("https://app.example", "http://b.example:81", "https://APP.example/"):
        assert ran(c, tmp_path, {"origin": origin}) and proxied(c, {"origin": origin}), origin
    for origin in ("http://app.example", "https://app.example:444", "http://localhost:3000", EVIL):
        assert not ran(c, tmp_path, {"origin": origin}) and not proxied(c, {"origin": origin}), origin
    c = client("--agent", "--cors-origins", "*")
    assert ran(c, tmp_path, {"origin": EVIL}) and proxied(c, {"origin": EVIL})
    c = client("--agent", "--cors-origins", "localhost")
    assert ran(c, tmp_path, {"origin": "http://localhost:1"}) and not ran(c, tmp_path, {"origin": EVIL})


def test_a_json_content_type_is_required_for_a_call(tmp_path):
    c = client("--tools", "all")
    assert ran(c, tmp_path, {}, "application/json") and ran(c, tmp_path, {}, "Application/JSON ; charset=utf-8")
    for ctype in ("text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
                  "multipart/form-data; boundary=x", "application/jsonx", "text/json", None):
        assert not ran(c, tmp_path, {}, ctype), ctype
    r = c.post("/tools", content=b"", headers={})     # no body: no tool can run; llama-server's own parse error
    assert r.status_code == 400 and r.json()["message"].startswith("[json.exception.parse_error.101]")


def test_host_rule_on_a_loopback_connection(tmp_path):
    c = client("--agent")
    for host in ("localhost", "localhost:8080", "127.0.0.1:8080", "127.8.9.1", "[::1]:8080", "::1", "[::1]",
                 "app.localhost:8080", "printer.local", "db.internal", "10.1.2.3:80", "192.168.0.2", "0.0.0.0",
                 socket.gethostname().upper() + ":8080", "LOCALHOST"):
        assert ran(c, tmp_path, {"host": host}) and proxied(c, {"host": host}), host
    for host in ("evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "8.8.8.8",
                 "localhost.", "[::1]evil"):
        assert not ran(c, tmp_path, {"host": host}) and not proxied(c, {"host": host}), host
    r = c.get("/tools", headers={"host": "evil.example"})
    err = r.json()["error"]
    assert (r.status_code, err["code"], err["type"]) == (403, 403, "permission_error")
    assert '"evil.example"' in err["message"] and "--agent-open" in err["message"]


def test_host_rule_names_the_bound_address_and_skips_other_connections(tmp_path):
    assert ran(client("--tools", "all", "--host", "myalias", base="http://127.0.0.1:8080"), tmp_path,
               {"host": "MyAlias:8080"})
    # a request that did not arrive on a loopback address (--host 0.0.0.0 reached from the LAN): Ollama's rule
    # checks the Host of loopback listeners only
    c = client("--tools", "all", "--host", "0.0.0.0", base="http://192.168.7.7:8080")
    assert ran(c, tmp_path, {"host": "evil.example"})
    assert not ran(c, tmp_path, {"host": "evil.example", "origin": EVIL})


def test_a_cross_site_request_without_origin_is_refused(tmp_path):
    # <img>/<script src> from another site: a no-cors GET carries no Origin, but Sec-Fetch-Site says cross-site
    c = client("--agent")
    assert not proxied(c, {"sec-fetch-site": "cross-site"})
    assert c.get("/tools", headers={"sec-fetch-site": "cross-site"}).status_code == 403
    for site in ("same-origin", "same-site", "none"):
        assert proxied(c, {"sec-fetch-site": site}) and ran(c, tmp_path, {"sec-fetch-site": site}), site
    assert proxied(client("--agent", "--cors-origins", "*"), {"sec-fetch-site": "cross-site"})


def test_agent_open_restores_llama_servers_behaviour(tmp_path):
    c = client("--agent", "--agent-open")
    assert ran(c, tmp_path, {"origin": EVIL, "host": "evil.example"}, "text/plain")
    assert ran(c, tmp_path, {"origin": EVIL}, None)
    assert proxied(c, {"origin": EVIL, "host": "evil.example", "sec-fetch-site": "cross-site"})
    assert c.get("/tools", headers={"origin": EVIL}).status_code == 200


def test_disabled_features_answer_as_llama_server_before_any_rule():
    c = client()
    for r in (c.get("/tools", headers={"origin": EVIL}), c.get(UNREACHABLE, headers={"host": "evil.example"})):
        assert (r.status_code, r.json()) == (403, {"error": {"message": "this feature is disabled",
                                                             "type": "feature_disabled"}})


def test_agent_open_is_a_flag_in_the_help():
    from bankml.server.flags import HELP
    assert "--agent-open" in HELP
    assert parse_flags(["--agent-open"]).agent_open and not parse_flags([]).agent_open


def test_llama_servers_cors_never_reflects_an_origin_the_guard_refuses(tmp_path):
    from bankml.server.agent import cors_proxy, guard, tools
    from bankml.server.http import LlamaHTTP

    def served(*flags: str) -> TestClient:
        app = Starlette(routes=tools.routes + cors_proxy.routes)
        app.state.cfg = cfg = parse_flags(list(flags))
        app.add_middleware(LlamaHTTP, cfg=cfg, withholds_cors=guard.withholds_cors)
        return TestClient(app, base_url="http://127.0.0.1:8080")

    def acao(r):
        return r.headers.get("access-control-allow-origin")
    c = served("--ui-mcp-proxy", "--tools", "all", "--cors-origins", "*", "--no-cors-credentials")
    assert acao(c.get(UNREACHABLE, headers={"origin": EVIL})) == "*"          # "*" allows any: no reflection
    for flags, paths in ((("--ui-mcp-proxy",), (UNREACHABLE,)),
                         (("--agent", "--cors-origins", "https://a.example"), ("/tools", UNREACHABLE))):
        c = served(*flags)
        for path in paths:
            for method in ("GET", "OPTIONS"):
                r = c.request(method, path, headers={"origin": EVIL})
                assert r.status_code == (200 if method == "OPTIONS" else 403) and acao(r) is None, (flags, path)
        r = c.get(UNREACHABLE, headers={"origin": "http://localhost:5173" if len(flags) == 1 else "https://a.example"})
        assert r.status_code == 500 and acao(r) == ("http://localhost:5173" if len(flags) == 1 else "https://a.example")
    # --agent-open: llama-server's behaviour, the Origin reflected; a disabled route is llama-server's answer too
    assert acao(served("--ui-mcp-proxy", "--agent-open").get(UNREACHABLE, headers={"origin": EVIL})) == EVIL
    assert acao(served().get(UNREACHABLE, headers={"origin": EVIL})) == EVIL
    assert acao(served("--ui-mcp-proxy").get("/tools", headers={"origin": EVIL})) == EVIL
