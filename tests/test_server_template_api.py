"""bankml.server.api.template: /apply-template and /v1/chat/completions/input_tokens on a small app."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from bankml.chat.request import ServerChatOptions
from bankml.models.gguf import read_header_file
from bankml.server.api.template import routes
from bankml.chat.template import ChatTemplates

pytestmark = pytest.mark.slow                   # these read the SmolLM2 model file


class _ByteTokenizer:
    # a stand-in with the Tokenizer's call shape: one token a byte, plus BOS when add_special
    def __init__(self):
        self.calls = []

    def tokenize(self, text, add_special=False, parse_special=True):
        self.calls.append((text, add_special, parse_special))
        return ([1] if add_special else []) + list(text.encode())


@pytest.fixture
def client(smollm2_path):
    app = Starlette(routes=routes)
    app.state.template = ChatTemplates.from_gguf(read_header_file(smollm2_path))
    app.state.tokenizer = _ByteTokenizer()
    with TestClient(app) as c:
        yield c


def test_apply_template_returns_the_prompt(client):
    r = client.post("/apply-template", json={"messages": [{"role": "system", "content": "S"},
                                                          {"role": "user", "content": "u"}]})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json; charset=utf-8"
    assert r.json() == {"prompt": "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nu<|im_end|>\n"
                                  "<|im_start|>assistant\n"}
    assert r.content.startswith(b'{"prompt":"<|im_start|>')       # compact, as llama-server writes it


def test_apply_template_errors_have_llama_server_shape(client):
    r = client.post("/apply-template", json={})
    assert r.status_code == 400
    assert r.json() == {"error": {"code": 400, "message": "'messages' is required", "type": "invalid_request_error"}}
    r = client.post("/apply-template", json={"messages": [{"content": "hi"}]})
    assert r.status_code == 500
    assert r.json()["error"] == {"code": 500, "type": "server_error",
                                 "message": "Failed to parse messages: Missing 'role' in message: {\"content\":\"hi\"}"}


def test_invalid_json_body_is_a_500(client):
    r = client.post("/apply-template", content=b"{b", headers={"content-type": "application/json"})
    assert r.status_code == 500 and r.json()["error"]["type"] == "server_error"


def test_prefill_and_options(client, smollm2_path):
    body = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hel"}]}
    assert client.post("/apply-template", json=body).json()["prompt"].endswith("<|im_start|>assistant\nHel")
    client.app.state.chat_options = ServerChatOptions(prefill_assistant=False)
    assert client.post("/apply-template", json=body).json()["prompt"].endswith(
        "<|im_start|>assistant\nHel<|im_end|>\n<|im_start|>assistant\n")


def test_input_tokens_counts_the_prompt_with_specials(client):
    body = {"messages": [{"role": "user", "content": "hi"}]}
    prompt = client.post("/apply-template", json=body).json()["prompt"]
    r = client.post("/v1/chat/completions/input_tokens", json=body)
    assert r.status_code == 200
    assert r.json() == {"input_tokens": 1 + len(prompt.encode()), "object": "response.input_tokens"}
    assert client.app.state.tokenizer.calls[-1] == (prompt, True, True)
    r = client.post("/v1/chat/completions/input_tokens", json={"messages": 3})
    assert r.status_code == 400 and r.json()["error"]["message"] == "Expected 'messages' to be an array"


def test_invalid_utf8_in_a_prompt_is_replaced(client):
    # a template that slices a string inside a character: the JSON answer carries U+FFFD, as dump_safe does
    client.app.state.template = ChatTemplates.from_source("{{ messages[0].content[0:1] }}|")
    r = client.post("/apply-template", json={"messages": [{"role": "user", "content": "é"}]})
    assert r.status_code == 200 and r.json() == {"prompt": "\ufffd|"}
