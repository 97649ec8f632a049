"""bankml.server.app: routes, llama-server's headers, errors, API key and CORS on the SmolLM2 model."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from bankml.server.app import build_app
from bankml.server.context import model_meta

pytestmark = pytest.mark.slow                   # loads the SmolLM2 model


@pytest.fixture(scope="module")
def ctx(smollm2_path):
    from bankml.server.context import ServerContext
    from bankml.server.flags import parse_flags
    c = ServerContext.load(parse_flags(["-m", str(smollm2_path), "-c", "4096", "-np", "1"]))
    yield c
    _close_client()
    c.close()


_open: list[TestClient] = []


def _close_client() -> None:
    while _open:
        _open.pop().__exit__(None, None, None)


def _client(ctx, *flags):
    # entered, so that the app's lifespan runs (it starts the worker); the previous client is left first
    from bankml.server.flags import parse_flags
    _close_client()
    cfg = parse_flags(["-m", ctx.path, "-c", "4096", "-np", "1", *flags])
    ctx.cfg = cfg
    ctx.meta = model_meta(cfg, ctx.path, ctx.header, ctx.tokenizer)
    c = TestClient(build_app(ctx=ctx), raise_server_exceptions=False)
    c.__enter__()
    _open.append(c)
    return c


def test_health_and_headers(ctx):
    c = _client(ctx)
    r = c.get("/health", headers={"Origin": "http://example.com"})
    assert r.status_code == 200 and r.content == b'{"status":"ok"}'
    assert r.headers["server"] == "llama.cpp"
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert r.headers["access-control-allow-origin"] == "http://example.com"
    assert r.headers["keep-alive"] == "timeout=5, max=100"
    assert c.get("/v1/health").json() == {"status": "ok"}


def test_unknown_paths_and_methods_are_404(ctx):
    c = _client(ctx)
    for r in (c.get("/nope"), c.post("/health"), c.delete("/props")):
        assert r.status_code == 404
        assert r.content == b'{"error":{"message":"File Not Found","type":"not_found_error","code":404}}'
        assert r.headers["connection"] == "close"


def test_models_shape(ctx):
    body = _client(ctx).get("/v1/models").json()
    assert list(body) == ["models", "object", "data"]
    d = body["data"][0]
    assert d["id"] == ctx.path and d["aliases"] == [ctx.path] and d["owned_by"] == "llamacpp" and d["object"] == "model"
    assert d["meta"]["n_ctx"] == 4096 and d["meta"]["n_vocab"] == 49152 and d["meta"]["vocab_type"] == 2
    assert d["meta"]["ftype"] == "Q4_1"
    assert _client(ctx).get("/models").json()["models"] == body["models"]


def test_alias_names_the_model(ctx):
    body = _client(ctx, "--alias", "second,myalias").get("/v1/models").json()
    assert body["data"][0]["id"] == "myalias" and body["data"][0]["aliases"] == ["myalias", "second"]
    # test_basic.py::test_server_model_aliases_and_tags: std::set order, the first alias is the id
    c = _client(ctx, "--alias", "tinyllama-2,fim,code", "--tags", "chat,fim,small")
    d = c.get("/models").json()["data"][0]
    assert (d["id"], d["aliases"], d["tags"]) == ("code", ["code", "fim", "tinyllama-2"], ["chat", "fim", "small"])
    assert c.get("/props").json()["model_alias"] == "code"


def test_api_key(ctx):
    c = _client(ctx, "--api-key", "k1,k2")
    assert c.get("/health").status_code == 200                       # public
    r = c.get("/v1/models")
    assert r.status_code == 401
    assert r.content == b'{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}'
    assert c.get("/v1/models", headers={"Authorization": "Bearer k2"}).status_code == 200
    assert c.get("/v1/models", headers={"Authorization": "k1"}).status_code == 200
    assert c.get("/v1/models", headers={"X-Api-Key": "k1"}).status_code == 200
    assert c.get("/nope").status_code == 401                          # the key is checked before routing
    assert c.options("/v1/models").status_code == 200                 # OPTIONS never needs a key


def test_cors_options(ctx):
    r = _client(ctx, "--cors-origins", "localhost").options("/x", headers={"Origin": "http://localhost:3000"})
    assert r.status_code == 200 and r.content == b"" and r.headers["content-type"] == "text/html"
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert r.headers["access-control-allow-methods"] == "GET, POST, DELETE, OPTIONS"
    r = _client(ctx, "--cors-origins", "localhost").get("/health", headers={"Origin": "http://evil.com"})
    assert "access-control-allow-origin" not in r.headers
    r = _client(ctx, "--cors-origins", "http://a.b").get("/health")
    assert r.headers["access-control-allow-origin"] == "http://a.b"


def test_header_names_are_written_as_llama_server_writes_them(ctx):
    # cpp-httplib sends "Access-Control-Allow-Origin", not Starlette's lower case; llama.cpp's own server tests
    # read headers from a plain dict, so the case decides whether they find them (checked on the oracle with curl -i)
    r = _client(ctx).options("/completions", headers={"Origin": "localhost",
                                                      "Access-Control-Request-Method": "POST"})
    names = [k.decode() for k, _ in r.headers.raw]
    assert names[:2] == ["Server", "Access-Control-Allow-Origin"]
    assert {"Content-Type", "Content-Length", "Access-Control-Allow-Credentials", "Access-Control-Allow-Methods",
            "Access-Control-Allow-Headers", "Keep-Alive"} <= set(names)
    r = _client(ctx).post("/completion", json={"prompt": "hi", "n_predict": 1, "stream": True})
    names = [k.decode() for k, _ in r.headers.raw]
    assert "X-Accel-Buffering" in names and "Content-Type" in names
    assert all(n == "-".join(w.capitalize() for w in n.split("-")) for n in names)


def test_post_props_needs_the_flag(ctx):
    r = _client(ctx).post("/props", json={})
    assert r.status_code == 501 and r.json()["error"]["type"] == "not_supported_error"
    assert _client(ctx, "--props").post("/props", json={}).json() == {"success": True}


def test_tokenizer_and_template_routes_are_mounted(ctx):
    c = _client(ctx)
    assert c.post("/tokenize", json={"content": "hello"}).json() == {"tokens": [28120]}
    r = c.post("/apply-template", content=b"{b")
    assert r.status_code == 500 and r.json()["error"]["message"].startswith("[json.exception.parse_error.101]")
