"""Ollama v0.13.3's POST /api/embed and POST /api/embeddings on a real bankml-serve process, against
tests/oracle/ollama/embed.json (testing/record_ollama_embed.py: llama-server b11192's vectors for each request's
meaning, Ollama's normalization applied by the recorder on its own; the error answers from Ollama's source, each
naming its line).

- every recorded request with vectors: status 200, the body's keys in api.EmbedResponse's order (durations
  present), prompt_eval_count, and each value's float32 bits identical to the record; each number written as Go
  writes a float32 (/api/embed) or a float64 (/api/embeddings), checked with numpy's shortest digits;
- every fixed answer (errors, load-only answers): status, Content-Type and body bytes identical;
- the `ollama` package's `embed` and `embeddings`, unchanged, answer the same vectors.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from ollama_serve import MODEL, call, go_json, serve

pytestmark = pytest.mark.slow

RECORDS = json.loads((Path(__file__).parent / "oracle" / "ollama" / "embed.json").read_text())
REQUESTS = RECORDS["requests"]
FIXED = RECORDS["fixed"]
JSON_TYPE = "application/json; charset=utf-8"


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("ollama-embed-models")) as srv:
        yield srv.port


def test_records_cover_the_brief():
    assert len(REQUESTS) >= 40 and len([c for c in FIXED if c["status"] >= 400]) >= 20
    assert {c["path"] for c in REQUESTS} == {"/api/embed", "/api/embeddings"}
    assert all(c.get("source") for c in FIXED)
    steps = [s for c in REQUESTS for s in c["steps"]]
    assert any("truncated_to" in s for s in steps) and any(s.get("coerced") for s in steps)
    assert any(s["n_tokens"] > 512 for s in steps)              # more than one ubatch
    assert any(0 < c["body"].get("dimensions", 0) < 576 for c in REQUESTS)


# --- Go's number formatting, from numpy's shortest digits ---------------------------------------------------------

def _go_float(x: float, bits: int) -> str:
    """encoding/json's floatEncoder: strconv 'f' or, below 1e-6 / from 1e21, 'e' (exponent without its leading
    zero), with the shortest digits of the float32 or float64."""
    v = np.float32(x) if bits == 32 else np.float64(x)
    if v == 0:
        return "-0" if np.signbit(v) else "0"
    a = abs(float(v))
    if a < 1e-6 or a >= 1e21:
        # strconv writes at least two exponent digits; encoding/json drops the zero of e-0X; exponents >= 21
        return np.format_float_scientific(v, unique=True, trim="-", exp_digits=1)
    return np.format_float_positional(v, unique=True, trim="-")


_NUMBER = re.compile(rb"-?\d[\d.eE+-]*")


def _numbers(body: bytes, key: bytes) -> list[str]:
    """The number tokens inside the body's array `key` (the whole body is JSON numbers and brackets there)."""
    start = body.index(b'"' + key + b'":') + len(key) + 3
    depth, end = 0, start
    for i in range(start, len(body)):
        c = body[i:i + 1]
        depth += c == b"["
        depth -= c == b"]"
        if depth == 0:
            end = i + 1
            break
    return [m.decode() for m in _NUMBER.findall(body[start:end])]


def _bits(values) -> str:
    return np.asarray(values, dtype="<f4").tobytes().hex()


def _check_vectors(case: dict, a) -> list[str]:
    problems = []
    if a.status != 200:
        return [f"{case['name']}: {a.status} {a.body[:300]!r}"]
    if a.content_type != JSON_TYPE:
        problems.append(f"{case['name']}: content-type {a.content_type}")
    d = json.loads(a.body)
    if case["path"] == "/api/embed":
        keys = ["model", "embeddings", "total_duration", "load_duration", "prompt_eval_count"]
        if list(d) != keys and list(d) != [k for k in keys if k != "load_duration"]:
            problems.append(f"{case['name']}: keys {list(d)}")
        if d["model"] != case["body"]["model"] or d.get("prompt_eval_count") != case["prompt_eval_count"]:
            problems.append(f"{case['name']}: model / count {d['model']} {d.get('prompt_eval_count')} "
                            f"!= {case['prompt_eval_count']}")
        if not (isinstance(d["total_duration"], int) and d["total_duration"] > 0):
            problems.append(f"{case['name']}: total_duration {d['total_duration']}")
        vecs, bits, key = d["embeddings"], 32, b"embeddings"
    else:
        if list(d) != ["embedding"]:
            problems.append(f"{case['name']}: keys {list(d)}")
        vecs, bits, key = [d["embedding"]], 64, b"embedding"
    if [_bits(v) for v in vecs] != case["vectors"]:
        n = next((i for i, (v, w) in enumerate(zip(vecs, case["vectors"])) if _bits(v) != w), len(vecs))
        problems.append(f"{case['name']}: vector {n} differs ({len(vecs)} vs {len(case['vectors'])} vectors)")
    if bits == 64 and any(float(np.float32(x)) != x for v in vecs for x in v):
        problems.append(f"{case['name']}: a float64 that is no float32")
    texts = _numbers(a.body, key)
    want = [_go_float(x, bits) for v in vecs for x in v]
    if texts != want:
        i = next(i for i, (x, y) in enumerate(zip(texts + [""] * len(want), want)) if x != y)
        problems.append(f"{case['name']}: number {i} written {texts[i] if i < len(texts) else None!r}, "
                        f"Go writes {want[i]!r}")
    return problems


def test_go_float_formatting():
    # strconv.FormatFloat's examples, as encoding/json writes them
    assert _go_float(struct.unpack("<f", struct.pack("<f", 0.1))[0], 32) == "0.1"
    assert _go_float(float(np.float32(0.1)), 64) == "0.10000000149011612"
    assert _go_float(1e-7, 64) == "1e-7" and _go_float(float(np.float32(-2.5e-8)), 32) == "-2.5e-8"
    assert _go_float(123456.0, 32) == "123456" and _go_float(-0.0, 32) == "-0"


def test_vectors_identical(port):
    problems = []
    for case in REQUESTS:
        problems += _check_vectors(case, call(port, "POST", case["path"], body=case["body"]))
    assert not problems, f"{len(problems)} of {len(REQUESTS)} differ:\n" + "\n".join(problems[:10])


def test_fixed_answers_identical(port):
    problems = []
    for case in FIXED:
        if "raw" in case:
            a = call(port, "POST", case["path"], raw=case["raw"].encode(),
                     headers={"Content-Type": "application/json"})
        else:
            a = call(port, "POST", case["path"], body=case["body"])
        want = go_json(case["answer"])
        if (a.status, a.content_type, a.body) != (case["status"], JSON_TYPE, want):
            problems.append(f"{case['name']} ({case['source']}): {a.status} {a.content_type} {a.body[:200]!r} "
                            f"!= {case['status']} {want!r}")
    assert not problems, f"{len(problems)} of {len(FIXED)} differ:\n" + "\n".join(problems)


def test_ollama_client(port):
    ollama = pytest.importorskip("ollama", reason="the `ollama` package (a test extra) is not installed")
    client = ollama.Client(host=f"http://127.0.0.1:{port}")
    by_name = {c["name"]: c for c in REQUESTS}
    case = by_name["array_3"]
    r = client.embed(model=MODEL, input=case["body"]["input"])
    assert r.model == MODEL and r.prompt_eval_count == case["prompt_eval_count"]
    assert [_bits(v) for v in r.embeddings] == case["vectors"]
    case = by_name["dimensions_16"]
    r = client.embed(model=MODEL, input=case["body"]["input"], dimensions=16)
    assert [_bits(v) for v in r.embeddings] == case["vectors"] and len(r.embeddings[0]) == 16
    case = by_name["embeddings_0"]
    r = client.embeddings(model=MODEL, prompt=case["body"]["prompt"])
    assert [_bits(r.embedding)] == case["vectors"]
    with pytest.raises(ollama.ResponseError) as e:
        client.embed(model="nope", input="a")
    assert e.value.status_code == 404 and e.value.error == 'model "nope" not found, try pulling it first'
    with pytest.raises(ollama.ResponseError) as e:
        client.embed(model=MODEL, input=["a", ""])
    assert e.value.status_code == 500 and e.value.error == "Failed to create new sequence: no input provided"
