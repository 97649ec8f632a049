"""Real Ollama clients, unchanged, against a real bankml-serve process: the official `ollama` package (chat,
generate, a stream of each, list, ps, show, create, copy, delete, pull of a model already there, and the status
codes of its ResponseError), langchain-ollama's ChatOllama (invoke, stream) and llama-index-llms-ollama's Ollama
(chat, stream_chat), each pointed at the server with `host`/`base_url`.

Every request is seeded and greedy (temperature 0), so each client's text is checked equal to bankml's own
/api/chat answer to the same request (sent as raw HTTP), and to /v1/chat/completions' answer of the same
meaning: Ollama's DefaultOptions (api/types.go:878) spelled out as llama-server sampling fields, since at
temperature 0 the mapping is direct (num_predict -> max_tokens, the repeat penalty over the last 64 tokens,
min_p 0 where llama-server's default is 0.05).

The client packages are test extras (pyproject.toml); a missing one skips its tests with the reason.
"""

from __future__ import annotations

import pytest

from ollama_serve import MODEL, call, serve

pytestmark = pytest.mark.slow

ollama = pytest.importorskip("ollama", reason="the `ollama` package (a test extra) is not installed")

TAG = f"{MODEL}:latest"
QUESTION = "What is the capital of France?"
MESSAGES = [{"role": "user", "content": QUESTION}]
OPTIONS = {"temperature": 0, "seed": 42, "num_predict": 8}
# Ollama's DefaultOptions for what OPTIONS leaves unset, as llama-server's fields of the same meaning
DEFAULTS_AS_LLAMA = {"top_k": 40, "top_p": 0.9, "min_p": 0.0, "typical_p": 1.0, "repeat_last_n": 64,
                     "repeat_penalty": 1.1, "presence_penalty": 0.0, "frequency_penalty": 0.0}


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("ollama-clients-models")) as srv:
        yield srv.port


@pytest.fixture(scope="module")
def host(port):
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def client(host):
    return ollama.Client(host=host)


def api_chat(port, messages=MESSAGES, options=OPTIONS) -> str:
    a = call(port, "POST", "/api/chat", body={"model": MODEL, "messages": messages, "options": options,
                                               "stream": False})
    assert a.status == 200, a.body
    return a.json()["message"]["content"]


def v1_chat(port, messages=MESSAGES, options=OPTIONS) -> str:
    body = {"messages": messages, "max_tokens": options["num_predict"], "temperature": options["temperature"],
            "seed": options["seed"], **DEFAULTS_AS_LLAMA}
    a = call(port, "POST", "/v1/chat/completions", body=body)
    assert a.status == 200, a.body
    return a.json()["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def answer(port) -> str:
    text = api_chat(port)
    assert text and text == v1_chat(port)          # the same meaning, the same tokens, whichever API asked
    return text


# ---------------------------------------------------------------- the ollama package

def test_chat(client, answer):
    r = client.chat(model=MODEL, messages=MESSAGES, options=OPTIONS)
    assert r.message.role == "assistant" and r.message.content == answer
    assert r.done and r.done_reason == "length" and r.eval_count == OPTIONS["num_predict"]
    assert r.model == MODEL and r.created_at


def test_chat_stream(client, answer):
    parts = list(client.chat(model=MODEL, messages=MESSAGES, options=OPTIONS, stream=True))
    assert all(not p.done for p in parts[:-1]) and parts[-1].done and parts[-1].done_reason == "length"
    assert "".join(p.message.content for p in parts) == answer


def test_generate(client, port):
    prompt = "Name a color."
    a = call(port, "POST", "/api/generate", body={"model": MODEL, "prompt": prompt, "options": OPTIONS,
                                                   "stream": False}).json()
    r = client.generate(model=MODEL, prompt=prompt, options=OPTIONS)
    assert r.response == a["response"] and r.response
    assert r.done and r.done_reason == a["done_reason"] and list(r.context) == a["context"]
    # generate's prompt is the chat template over [user: prompt]: the same tokens as a chat of that message
    assert r.response == api_chat(port, [{"role": "user", "content": prompt}])
    parts = list(client.generate(model=MODEL, prompt=prompt, options=OPTIONS, stream=True))
    assert parts[-1].done and "".join(p.response for p in parts) == r.response


def test_list_ps_show(client):
    names = [m.model for m in client.list().models]
    assert TAG in names
    m = next(m for m in client.list().models if m.model == TAG)
    assert m.details.family == "llama" and m.details.quantization_level == "Q4_1" and m.size > 0 and m.digest
    client.chat(model=MODEL, messages=[])                               # load it
    ps = client.ps().models
    assert [p.model for p in ps] == [TAG] and ps[0].context_length == 4096 and ps[0].expires_at is not None
    s = client.show(MODEL)
    assert s.details.family == "llama" and s.capabilities == ["completion"]
    assert s.modelinfo["general.architecture"] == "llama" and s.modified_at is not None


def test_create_copy_delete(client, port):
    r = client.create(model="h4-client-derived", from_=MODEL, system="You answer in one word.",
                      parameters={"num_predict": 4})
    assert r.status == "success"
    s = client.show("h4-client-derived")
    # the client's ShowResponse has no `system` field: the SYSTEM line is in the modelfile
    assert "You answer in one word." in s.modelfile and s.details.parent_model == TAG
    # the derived model answers as its base does with its SYSTEM in front and its parameters under the request's
    sys_msgs = [{"role": "system", "content": "You answer in one word."}] + MESSAGES
    got = client.chat(model="h4-client-derived", messages=MESSAGES, options={"temperature": 0, "seed": 42})
    assert got.message.content == api_chat(port, sys_msgs, {"temperature": 0, "seed": 42, "num_predict": 4})
    assert got.eval_count == 4
    assert client.copy("h4-client-derived", "h4-client-copy").status == "success"
    names = [m.model for m in client.list().models]
    assert {"h4-client-derived:latest", "h4-client-copy:latest"} <= set(names)
    assert client.delete("h4-client-copy").status == "success"
    assert client.delete("h4-client-derived").status == "success"
    names = [m.model for m in client.list().models]
    assert "h4-client-copy:latest" not in names and "h4-client-derived:latest" not in names and TAG in names


def test_pull_present(client):
    assert client.pull(MODEL).status == "success"
    assert list(client.pull(MODEL, stream=True))[-1].status == "success"


def test_response_errors(client):
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model="nosuch-h4", messages=MESSAGES)
    assert (e.value.status_code, e.value.error) == (404, "model 'nosuch-h4' not found")   # routes.go:1887
    with pytest.raises(ollama.ResponseError) as e:
        client.generate(model="nosuch-h4", prompt="x")
    assert (e.value.status_code, e.value.error) == (404, "model 'nosuch-h4' not found")   # routes.go:212
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model=MODEL, messages=MESSAGES, keep_alive="300")
    assert (e.value.status_code, e.value.error) == (400, 'time: missing unit in duration "300"')  # types.go:1040
    with pytest.raises(ollama.ResponseError) as e:
        client.chat(model=MODEL, messages=MESSAGES, options={"num_ctx": "big"})
    assert (e.value.status_code, e.value.error) == (500, 'option "num_ctx" must be of type integer')  # types.go:819
    with pytest.raises(ollama.ResponseError) as e:
        client.show("nosuch-h4")
    assert e.value.status_code == 404                                                     # routes.go:1051
    with pytest.raises(ollama.ResponseError) as e:
        client.delete("nosuch-h4")
    assert e.value.status_code == 404                                                     # routes.go:1008


# ---------------------------------------------------------------- langchain-ollama, llama-index

def test_langchain_chat_ollama(host, answer):
    lc = pytest.importorskip("langchain_ollama", reason="langchain-ollama (a test extra) is not installed")
    llm = lc.ChatOllama(model=MODEL, base_url=host, temperature=0, seed=42, num_predict=8)
    assert llm.invoke(QUESTION).content == answer
    assert "".join(c.content for c in llm.stream(QUESTION)) == answer


def test_llama_index_ollama(host, answer):
    li = pytest.importorskip("llama_index.llms.ollama", reason="llama-index-llms-ollama (a test extra) is not "
                                                               "installed")
    from llama_index.core.llms import ChatMessage
    llm = li.Ollama(model=MODEL, base_url=host, temperature=0, context_window=4096, request_timeout=120,
                    additional_kwargs={"seed": 42, "num_predict": 8})
    msgs = [ChatMessage(role="user", content=QUESTION)]
    assert llm.chat(msgs).message.content == answer
    streamed = list(llm.stream_chat(msgs))
    assert streamed[-1].message.content == answer and "".join(r.delta or "" for r in streamed) == answer
