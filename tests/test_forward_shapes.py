"""Replay the logits oracle of the synthetic shapes (tests/oracle/forward/shapes.json and shapes_1b.json, recorded by
`testing/record_forward.py shapes shapes_1b` from libllama b11192 with llama-server's context: -c 4096, n_ubatch
512, flash attention, F16 cache, -t 2) on the files bankml.models.synth writes: shapes SmolLM2 does not have, with
SmolLM2's vocabulary and template. Every recorded row (a whole prompt's last-token logits, then each greedy
decode step) must have the same float32 bits and argmax.

Shapes: head size 128 with GQA 4 and an untied output (Q8_0 and F16), head size 256 with GQA 1 (tied, Q8_0), head
size 64 with GQA 8 and an untied output (Q4_1), qwen3's graph at head size 128 (Q8_0), and the 1B llama model
(n_embd 2048, 24 layers, head size 128, GQA 4, untied; Q4_1). The prompts (1 .. 1500 tokens) cross 64, 256, 512
and 1024; 8 decode steps after 511 and 1023 tokens cross 512 and 1024. The files are made when missing in
<models>/derived (about a minute for the small ones, two for the 1B one) and checked against the records' sha256.
"""

from __future__ import annotations

import pytest

from engine_replay import RecordedModels, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SETS = record_sets("shapes") + record_sets("shapes_1b")
CASES = [(s, c) for s in SETS for c in s["cases"]]


def _type_of(rec: dict) -> str:
    return rec["model"].rsplit("-", 1)[1].removesuffix(".gguf").upper()


@pytest.fixture(scope="module")
def models(smollm2_path):
    from bankml.models import synth

    def path_of(name: str):
        rec = next(s for s in SETS if s["model"] == name)
        return synth.ensure(smollm2_path.parent, rec["context"]["shape"], _type_of(rec), smollm2_path)
    with RecordedModels(path_of) as m:
        yield m


def test_the_records_cover_the_shapes():
    from bankml.models import synth
    assert {s["context"]["shape"] for s in SETS} == set(synth.SHAPES)
    for s in SETS:
        lengths = [len(c["prompt"]) for c in s["cases"]]
        if s["context"]["shape"] != "llama-1b":
            assert min(lengths) == 1 and max(lengths) >= 1500 and len(lengths) >= 13
            assert any(len(c["prompt"]) < 512 < len(c["prompt"]) + c["steps"] for c in s["cases"])
            assert any(len(c["prompt"]) < 1024 < len(c["prompt"]) + c["steps"] for c in s["cases"])
    shapes = {s["context"]["shape"]: synth.SHAPES[s["context"]["shape"]] for s in SETS}
    assert {sh.head_dim for sh in shapes.values()} >= {64, 128, 256}
    assert {sh.n_head // sh.n_head_kv for sh in shapes.values()} >= {1, 4, 8}
    assert any(not sh.tied for sh in shapes.values()) and any(sh.arch == "qwen3" for sh in shapes.values())
    big = synth.SHAPES["llama-1b"]
    assert big.n_embd == 2048 and big.n_layer >= 24


@pytest.mark.parametrize("rec,case", CASES, ids=[f"{s['model']}-{c['id']}" for s, c in CASES])
def test_shape_rows_identical(models, rec, case):
    assert replay(models(rec), case) == case["steps"] + 1


def test_synthetic_files_are_deterministic(tmp_path, smollm2_path):
    from bankml.models import synth
    from bankml.models.verify import sha256_file
    a = synth.write(tmp_path / "a.gguf", "llama-h256-gqa1", smollm2_path, "Q8_0")
    rec = next(s for s in SETS if s["context"]["shape"] == "llama-h256-gqa1")
    assert sha256_file(a) == rec["model_sha256"]
    with pytest.raises(synth.SynthError, match="unknown shape"):
        synth.write(tmp_path / "b.gguf", "llama-h7", smollm2_path)
    with pytest.raises(synth.SynthError, match="not 'Q4_K'"):
        synth.write(tmp_path / "b.gguf", "llama-h256-gqa1", smollm2_path, "Q4_K")
    assert not (tmp_path / "b.gguf").exists()
