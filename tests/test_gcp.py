"""Vertex AI prediction compatibility (bankml.server.api.gcp; issue 18, test_compat_gcp), over a real bankml-serve
started as Vertex AI starts a custom container (AIP_MODE=PREDICTION, AIP_HTTP_PORT, AIP_HEALTH_ROUTE).

- llama.cpp's own two tests of tools/server/tests/unit/test_compat_gcp.py (b11192), with SmolLM2;
- each prediction is what the route it names answers to the same body on the same server (greedy);
- the aliases as llama-server b11192 resolves them (its hash order picks /v1/completions for "completions");
- the refusals' bodies, word for word as server-http.cpp writes them;
- AIP_HTTP_PORT replaces --port, AIP_HEALTH_ROUTE answers as /health, a predict route that is already a
  llama-server route stops the server, the API key gates /predict.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import server_replay as sr
from bankml.server.api import gcp

pytestmark = pytest.mark.slow

FLAGS = ["-c", "4096", "-t", "2"]


def test_aliases():
    assert gcp.alias_of("/v1/chat/completions") == "chatCompletions"
    assert gcp.alias_of("/apply-template") == "applyTemplate"
    assert gcp.alias_of("/slots/:id_slot") == "slots"
    assert gcp.alias_of("/chat/completions/input_tokens") == "chatCompletionsInputTokens"
    assert gcp.alias_of("/v1") == "v1"                       # only a longer path loses its /v1
    table = gcp.alias_table()
    assert table["completions"] == "/v1/completions" and table["completion"] == "/completion"
    assert table["props"] == "/props" and table["streamsLookup"] == "/v1/streams/lookup"
    assert gcp.handler_paths(gcp.Params(True, "", "/predict", 8080))["/props"] == "GET"


def test_params_from_env():
    p = gcp.Params.from_env({"AIP_MODE": "PREDICTION", "AIP_HEALTH_ROUTE": "hc", "AIP_PREDICT_ROUTE": "v1/pred",
                             "AIP_HTTP_PORT": "9000"})
    assert p == gcp.Params(True, "/hc", "/v1/pred", 9000)
    assert gcp.Params.from_env({}) == gcp.Params(False, "", "/predict", 8080)
    assert not gcp.Params.from_env({"AIP_MODE": "prediction"}).enabled


class Vertex(sr.BankmlServe):
    def __init__(self, argv, monkeypatch, health: str | None = None, api_key: str | None = None):
        port = sr.free_port()
        monkeypatch.setenv("AIP_MODE", "PREDICTION")
        monkeypatch.setenv("AIP_HTTP_PORT", str(port))
        if health:
            monkeypatch.setenv("AIP_HEALTH_ROUTE", health)
        # --port says another port: AIP_HTTP_PORT wins
        super().__init__(argv, port=port)
        self.argv[self.argv.index("--port") + 1] = str(port + 1 if port < 65535 else port - 1)


def post(port: int, path: str, body, headers: dict | None = None) -> dict:
    req = {"method": "POST", "path": path, "body": body}
    if headers:
        req["headers"] = headers
    return sr.answer_record(*sr.send(port, req, timeout=120))


@pytest.fixture(scope="module")
def server(smollm2_path):
    mp = pytest.MonkeyPatch()
    try:
        with Vertex(["-m", str(smollm2_path), "-np", "2"] + FLAGS, mp, health="/hc") as srv:
            yield srv
    finally:
        mp.undo()


def test_gcp_predict_camel_case(server):
    res = post(server.port, "/predict", {"instances": [{"@requestFormat": "chatCompletions", "max_tokens": 8,
                                                        "messages": [{"role": "user",
                                                                      "content": "What is the meaning of life?"}]}]})
    assert res["status"] == 200
    assert len(res["json"]["predictions"]) == 1
    prediction = res["json"]["predictions"][0]
    assert len(prediction["choices"]) == 1
    assert prediction["choices"][0]["message"]["role"] == "assistant"
    assert len(prediction["choices"][0]["message"]["content"]) > 0


def test_gcp_predict_multiple_instances(server):
    res = post(server.port, "/predict", {"instances": [
        {"@requestFormat": "chatCompletions", "max_tokens": 8, "messages": [{"role": "user", "content": "Say hello"}]},
        {"@requestFormat": "chatCompletions", "max_tokens": 8, "messages": [{"role": "user", "content": "Say world"}]},
    ]})
    assert res["status"] == 200
    assert len(res["json"]["predictions"]) == 2
    for prediction in res["json"]["predictions"]:
        assert len(prediction["choices"][0]["message"]["content"]) > 0


def test_predictions_are_the_routes_answers(server):
    chat = {"messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 6, "temperature": 0}
    comp = {"prompt": "The sky is", "n_predict": 5, "temperature": 0}
    direct_chat = post(server.port, "/v1/chat/completions", chat)["json"]
    direct_comp = post(server.port, "/completion", comp)["json"]
    direct_oai = post(server.port, "/v1/completions", comp)["json"]
    direct_tok = post(server.port, "/tokenize", {"content": "Hello world", "with_pieces": True})["json"]
    res = post(server.port, "/predict", {"instances": [
        dict(chat, **{"@requestFormat": "chatCompletions", "stream": True}),     # stream: made false
        dict(comp, **{"@requestFormat": "completion"}),
        dict(comp, **{"@requestFormat": "completions"}),
        {"@requestFormat": "/tokenize", "content": "Hello world", "with_pieces": True},
        {"@requestFormat": "health"},
        {"@requestFormat": "slots"},
    ]})
    assert res["status"] == 200
    p = res["json"]["predictions"]
    assert p[0]["choices"] == direct_chat["choices"] and p[0]["object"] == "chat.completion"
    assert p[1]["content"] == direct_comp["content"] and p[1]["tokens_predicted"] == direct_comp["tokens_predicted"]
    assert p[2]["object"] == "text_completion" and p[2]["choices"] == direct_oai["choices"]
    assert p[3] == direct_tok
    assert p[4] == {"status": "ok"}
    assert isinstance(p[5], list) and [s["id"] for s in p[5]] == [0, 1]


def test_a_routes_refusal_is_its_prediction(server):
    res = post(server.port, "/predict", {"instances": [{"@requestFormat": "embeddings", "input": "x"},
                                                       {"@requestFormat": "chatCompletions", "messages": 3}]})
    assert res["status"] == 200
    direct = post(server.port, "/v1/embeddings", {"input": "x"})
    assert res["json"]["predictions"][0] == direct["json"]
    assert res["json"]["predictions"][1] == post(server.port, "/v1/chat/completions", {"messages": 3})["json"]


def err(message: str) -> dict:
    return {"error": {"code": 400, "message": message, "type": "invalid_request_error"}}


def test_refusals(server):
    # server-http.cpp:829-853 (b11192): the body's refusals, 400
    not_object = post(server.port, "/predict", [1])
    assert not_object["status"] == 400 and not_object["json"] == err("request body must be a JSON object")
    assert post(server.port, "/predict", {"instances": 3})["json"] == err(
        "request body must include an array field named instances")
    assert post(server.port, "/predict", {"instances": [{}] * 129})["json"] == err(
        "instances array exceeds maximum size of 128")
    bad = sr.answer_record(*sr.send(server.port, {"method": "POST", "path": "/predict", "raw": "{bad"}))
    assert bad["status"] == 400 and bad["json"]["error"]["message"].startswith("[json.exception.parse_error.101]")
    # :866-893: an instance's own refusals
    res = post(server.port, "/predict", {"instances": [5, {"x": 1}, {"@requestFormat": 3},
                                                       {"@requestFormat": "nope"}, {"@requestFormat": "/slots/0"}]})
    assert res["status"] == 200
    assert res["json"]["predictions"] == [
        err("each instance must be a JSON object"), err("each instance must include a string @requestFormat"),
        err("each instance must include a string @requestFormat"),
        err("no handler registered for @requestFormat: nope"),
        err("no handler registered for @requestFormat: /slots/0")]


def test_health_route_and_port(server):
    assert sr.answer_record(*sr.send(server.port, {"method": "GET", "path": "/hc"}))["json"] == {"status": "ok"}
    wrong = int(server.argv[server.argv.index("--port") + 1])
    with pytest.raises(OSError):
        sr.send(wrong, {"method": "GET", "path": "/health"}, timeout=2)


def test_the_api_key_gates_predict(smollm2_path, monkeypatch):
    with Vertex(["-m", str(smollm2_path), "-np", "1", "--api-key", "k"] + FLAGS, monkeypatch) as srv:
        body = {"instances": [{"@requestFormat": "tokenize", "content": "a"}]}
        assert post(srv.port, "/predict", body)["status"] == 401
        ok = post(srv.port, "/predict", body, {"Authorization": "Bearer k"})
        assert ok["status"] == 200 and "tokens" in ok["json"]["predictions"][0]


def test_a_predict_route_that_is_taken_stops_the_server(smollm2_path):
    env = dict(os.environ, AIP_MODE="PREDICTION", AIP_PREDICT_ROUTE="health", AIP_HTTP_PORT=str(sr.free_port()))
    r = subprocess.run([sys.executable, "-m", "bankml.server.cli", "-m", str(smollm2_path)] + FLAGS, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "AIP_PREDICT_ROUTE=/health conflicts with an existing llama-server route" in r.stderr
