"""Replay the logits oracle (tests/oracle/forward/, recorded by testing/record_forward.py from libllama b11192):
every recorded row (a whole prompt's last-token logits, then each greedy decode step) must have the same float32
bits, compared as hashes of the bytes, and the same argmax.

Each case runs as llama-server runs it: one decode call for the prompt, one per generated token (the token fed
is the recorded argmax, which the test also checks bankml computes), on a cache cleared between cases. Every
row of every record is replayed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_replay import RecordedModels, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

RECORDS = ["q4_1", "f16", "q8_0", "f32", "kvq8", "threads", "threads_more"]


def _f32_model(q4_1: Path) -> Path:
    # SmolLM2 re-encoded as F32 by bankml's converter, made once into the models directory's derived/ (the
    # record pins its sha256, checked below); never committed
    dst = q4_1.parent / "derived" / "smollm2-135m-instruct-f32.gguf"
    if not dst.exists():
        from bankml.models import quantize
        quantize.convert(q4_1, dst, "F32", progress=False)
    return dst


@pytest.fixture(scope="module")
def models(smollm2_path, smollm2_f16_path, smollm2_q8_0_path):
    paths = {p.name: p for p in (smollm2_path, smollm2_f16_path, smollm2_q8_0_path)}
    if record_sets("f32"):
        paths["smollm2-135m-instruct-f32.gguf"] = _f32_model(smollm2_path)
    with RecordedModels(paths.__getitem__) as get:
        yield get


def _params():
    out = []
    for name in RECORDS:
        for rec in record_sets(name):
            ctx = rec["context"]
            for case in rec["cases"]:
                mid = "" if name != "threads_more" else rec["model"].rsplit("-", 1)[-1].removesuffix(".gguf") + "-"
                out.append(pytest.param(rec, case,
                                        id=f"{name}-{mid}t{ctx['threads']}-{ctx['cache_type']}-{case['id']}"))
    return out


def test_records_present():
    for name in RECORDS:
        assert record_sets(name), f"tests/oracle/forward/{name}.json is missing (testing/record_forward.py)"


@pytest.mark.parametrize("rec,case", _params())
def test_logits_oracle(models, rec, case):
    assert replay(models(rec), case) == case["steps"] + 1
