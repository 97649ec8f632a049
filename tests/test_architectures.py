"""bankml.models.arch: the architecture descriptions are well formed, and the guard (bankml.models.verify) and the
engine (bankml.engine.Model) read the same one: a change made only to a description shows up in both."""

from __future__ import annotations

import dataclasses

import pytest

from bankml.engine import HParams, Model, model as engine_model
from bankml.errors import ModelRefused
from bankml.models import arch, capabilities, gguf, verify
from bankml.models.gguf import ValueType as V
from gguf_writer import tiny_llama

LLAMA = arch.ARCHITECTURES["llama"]
PROV = {"how": "written by tests/test_architectures.py"}
# the engine's weights dict (bankml.engine._forward reads these slots)
GLOBAL_SLOTS = {"tok_embd", "output_norm", "output"}
LAYER_SLOTS = {"attn_norm", "ffn_norm", "wq", "wk", "wv", "wo", "gate", "up", "down"}


@pytest.mark.parametrize("name", sorted(arch.ARCHITECTURES))
def test_descriptions_are_well_formed(name):
    a = arch.ARCHITECTURES[name]
    assert a.name == name
    fields = a.fields
    assert len(set(fields)) == len(fields) and len({k.suffix for k in a.keys}) == len(a.keys)
    own = {f.name for f in dataclasses.fields(HParams)} - {"arch", "tied_output", "extra"}
    assert own <= set(fields), own - set(fields)  # every HParams field has a key and a default rule
    for i, k in enumerate(a.keys):
        assert k.gguf_type in V.__members__, k
        if isinstance(k.default, (arch.Same, arch.Ratio)):  # rules read fields declared before them
            reads = {k.default.of} if isinstance(k.default, arch.Same) else {k.default.num, k.default.den}
            assert reads <= set(fields[:i]), k
    assert not set(a.unsupported) & {k.suffix for k in a.keys}
    names = {t.name for t in a.tensors}
    for t in a.tensors:
        assert t.role in capabilities.WEIGHT_TYPES, t
        assert all(d in a.dims or d in fields for d in t.shape), t
        assert t.tied_to is None or (t.tied_to in names and not t.required), t
    for c in a.checks:
        assert set(c.reads) <= set(fields), c
    assert a.dim_fields() <= set(fields)
    assert capabilities.ARCHITECTURES[name] == a.table()


def test_llama_slots_are_the_engines():
    a = arch.ARCHITECTURES["llama"]
    assert {t.slot for t in a.tensors if not t.per_layer} == GLOBAL_SLOTS
    assert {t.slot for t in a.tensors if t.per_layer} == LAYER_SLOTS


def test_qwen3_is_llama_with_per_head_norms():
    # src/models/qwen3.cpp: llama's tensors and keys plus attn_q_norm / attn_k_norm, NEOX RoPE; F16 and Q8_0 caches
    q = arch.ARCHITECTURES["qwen3"]
    assert {t.slot for t in q.tensors} == {t.slot for t in LLAMA.tensors} | {"q_norm", "k_norm"}
    assert q.keys == LLAMA.keys and (q.rope, q.swa, q.cache_types) == ("neox", "none", ("f16", "q8_0"))


def test_every_description_has_a_compiled_graph():
    from bankml.engine import _forward
    assert sorted(_forward.architectures()) == sorted(arch.ARCHITECTURES)


def test_the_weights_dict_follows_the_tensor_table(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(tiny_llama())
    f = gguf.GGUFFile(p)
    try:
        w = engine_model._weights(arch.ARCHITECTURES["llama"], f, 2)
        assert set(w) == GLOBAL_SLOTS | {"layers"} and len(w["layers"]) == 2
        assert all(set(layer) == LAYER_SLOTS for layer in w["layers"])
        assert w["output"][0] is not None and w["output"][2:] == w["tok_embd"][2:]  # tied: token_embd's shape
    finally:
        f.close()


def test_the_reading_of_a_header(tmp_path):
    p = tmp_path / "m.gguf"
    p.write_bytes(tiny_llama(drop=("llama.rope.dimension_count", "llama.attention.head_count_kv")))
    r = arch.ARCHITECTURES["llama"].read(verify.guard(p).header)
    assert r.reasons == []
    assert (r.values["n_head_kv"], r.values["head_dim"], r.values["n_rot"], r.values["n_vocab"]) == (4, 16, 16, 8)
    assert r.dims["n_embd_kv"] == 64 and r.n_layer == 2


def test_odd_head_size_is_refused_by_the_guard(tmp_path):
    # the graph check the engine used to make on its own, now the guard's (so verify refuses before loading)
    p = tmp_path / "m.gguf"
    p.write_bytes(tiny_llama(n_embd=60, n_head=4, n_head_kv=2))
    r = verify.guard(p)
    assert r.verdict == "refuse" and any(x.startswith("head size 15 is odd") for x in r.reasons), r.reasons


@pytest.fixture
def tiny(tmp_path):
    def make(**kw):
        p = tmp_path / "m.gguf"
        p.write_bytes(tiny_llama(**kw))
        verify.pin(p, PROV)
        return p
    return make


def _with(monkeypatch, **changes):
    """The llama description with `changes` (to the shipped one), in the table for this test."""
    changed = dataclasses.replace(LLAMA, **changes)
    monkeypatch.setitem(arch.ARCHITECTURES, "llama", changed)
    return changed


def test_a_description_check_refuses_in_the_guard_and_in_model_open(tiny, monkeypatch):
    p = tiny()
    assert verify.guard(p).verdict == "play"
    llama = LLAMA
    _with(monkeypatch, checks=llama.checks + (
        arch.Check(("n_layer",), lambda v: v["n_layer"] >= 3, "only {n_layer} layers; this graph needs 3"),))
    assert verify.guard(p).reasons == ["only 2 layers; this graph needs 3"]
    with pytest.raises(ModelRefused, match="only 2 layers; this graph needs 3"):
        Model.open(p, n_ctx=256)


def test_a_description_default_reaches_the_engine(tiny, monkeypatch):
    p = tiny(drop=("llama.rope.freq_base",))
    with Model.open(p, n_ctx=256) as m:
        assert m.hparams.rope_freq_base == 10000.0
    llama = LLAMA
    keys = tuple(dataclasses.replace(k, default=500000.0) if k.suffix == "rope.freq_base" else k for k in llama.keys)
    _with(monkeypatch, keys=keys)
    assert verify.guard(p).verdict == "play"
    with Model.open(p, n_ctx=256) as m:
        assert m.hparams.rope_freq_base == 500000.0


def test_a_description_key_and_tensor_change_show_in_both(tiny, monkeypatch):
    # a new required key (an extra field: HParams.extra and the engine config) and an unsupported key
    p = tiny(kvs={"llama.x_scale": (V.FLOAT32, 2.0)})
    llama = LLAMA
    _with(monkeypatch, keys=llama.keys + (arch.Key("x_scale", "FLOAT32", "x_scale", required=True),))
    assert verify.guard(p).verdict == "play"
    with Model.open(p, n_ctx=256) as m:
        assert m.hparams.extra == {"x_scale": 2.0} and engine_model._config(m.hparams)["x_scale"] == 2.0
    _with(monkeypatch, unsupported={**llama.unsupported, "x_scale": 1.0})
    assert verify.guard(p).reasons == ["llama.x_scale = 2.0 is not supported yet (only 1.0)"]
    with pytest.raises(ModelRefused, match="x_scale"):
        Model.open(p, n_ctx=256)
    # a tensor the description no longer has: the guard refuses it as unused
    _with(monkeypatch, tensors=tuple(t for t in llama.tensors if t.name != "output.weight"))
    q = tiny(extra_tensors=[("output.weight", (64, 8))])
    assert verify.guard(q).reasons == [
        "1 tensor the engine does not use (llama.cpp refuses unused tensors): 'output.weight'"]
