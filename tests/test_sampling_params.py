"""Request parameters (bankml.sampling.params + the sampler's init checks) against llama-server b11192:
tests/oracle/sampling/params.json holds, per /completion body, the status and either the error body or the
`generation_settings` the server reports (testing/record_sampling.py params)."""

from __future__ import annotations

import json
import re

import pytest

import bankml.sampling as sampling
from bankml.sampling.params import RequestError, props_json
from bankml.sampling.sampler import Sampler


@pytest.fixture(scope="module")
def rec(oracle_dir):
    return json.loads((oracle_dir / "sampling" / "params.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tok_defaults(smollm2_path, rec):
    from bankml.models.gguf import read_header_file
    from bankml.tokenizer import Tokenizer
    header = read_header_file(smollm2_path)
    tok = Tokenizer.from_gguf(header)
    args = rec["server_args"]
    n_predict = int(args[args.index("-n") + 1]) if "-n" in args else -1
    return tok, sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids, n_predict=n_predict)


def _resolve(body, defaults, tok):
    """(status, error body | generation_settings) as the server answers a /completion body"""
    try:
        p = sampling.from_request(body, defaults, tok)
        Sampler(p, tok)
    except RequestError as e:
        return e.status, e.body()
    return 200, p.to_json()


def _not_reproduced(body) -> bool:
    """bankml refuses (501) what it does not reproduce where llama-server runs it: the infill sampler"""
    s = body.get("samplers")
    infill = (isinstance(s, list) and any(isinstance(x, str) and x.lower() == "infill" for x in s)) or (
        isinstance(s, str) and "i" in s)
    return infill


def _unwrapped(body, want):
    """bankml's departure (issue 19, finding 8): a hard-limited integer field whose value the C type cannot
    hold is refused showing the request's number, where llama-server shows get<int>'s wrapped one."""
    m = re.match(r"Field '([^']+)': Value must be between (.*), but got -?[0-9]+$", want["error"]["message"])
    v = body.get(m.group(1)) if m else None
    if type(v) is int and not -2**31 <= v < 2**31:
        want = {"error": dict(want["error"], message=want["error"]["message"].rsplit(" ", 1)[0] + f" {v}")}
    return want


def test_request_records(rec, tok_defaults):
    tok, defaults = tok_defaults
    n = refused = 0
    for r in rec["records"]:
        body = r["body"]
        status, got = _resolve(body, defaults, tok)
        if status == 501:
            assert _not_reproduced(body) and r["status"] == 200, body
            continue
        if "response_keys" in r:   # response_fields projected the answer: the names it kept
            assert status == 200
            p = sampling.from_request(body, defaults, tok)
            assert sorted(p.response_fields) == r["response_keys"], body
            n += 1
            continue
        want = r["generation_settings"] if r["status"] == 200 else r["error"]
        if r["status"] != 200:
            want = _unwrapped(body, want)
        assert (status, got) == (r["status"], want), body
        n += 1
        refused += r["status"] != 200
    assert n >= 250 and refused >= 40


def test_props_defaults(rec, tok_defaults):
    tok, defaults = tok_defaults
    assert props_json(defaults, 4096) == rec["props"]
