"""Record the logits libllama b11192 computes for batches of several sequences in one unified KV cache
(llama-server `-np auto` or `-kvu`: kv_unified, one stream of n_ctx cells that every sequence shares), into
tests/oracle/forward/multiseq_unified.json (schedules and hashes; replayed by tests/test_multiseq.py).

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_multiseq_unified.py

The context is made as llama-server makes it for `-np auto -c 4096 -t 2` (testing/libllama_multiseq_shim.c:
n_ctx 4096, n_seq_max 4, kv_unified true, n_batch 2048, n_ubatch 512, flash attention auto). Each schedule is a
run of steps, each one llama_decode holding, in llama-server's batch order, one decode row per generating
sequence (slot order) then the prompt chunks of prompting sequences (slot order) within MAX_STEP_TOKENS. Before
a step, sequences may end (llama_memory_seq_rm(seq, -1, -1): their cells become holes that later tokens fill)
or keep only a prefix (seq_rm(seq, n_keep, -1), llama-server reusing a cached prompt) and go on from it with a
new prompt. Outputs are the decode rows and the last token of each finished prompt; each output row is kept as
the first 24 hex digits of the sha256 of its float32 bytes, with its argmax.

SCHEDULES seeded schedules of 2 .. 4 sequences on the Q4_1 file with the F16 cache, KVQ8_SCHEDULES with
`--cache-type-k/v q8_0`, F16_SCHEDULES on the F16 file (its kernels follow a MUL_MAT node's column count: the
gathered output rows), and the hand-made ones of `made()` on each cache type: a lone decode row whose split-KV
chunk holds only other sequences' cells (or none of any), a 513-token batch whose last ubatch is one prompt row,
prompts that fill holes and interleave.

Token ids are not stored: tests/engine_replay.py's `lcg_tokens(seed, n_vocab)` draws them in item order, for the
recorder and the test alike; each schedule keeps the sha256 of its ids.

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_multiseq_unified.py qwen3

writes tests/oracle/forward/multiseq_unified_qwen3.json instead: the qwen3 graph on the Q4_1 file re-described as
qwen3 (testing/record_forward.py derived("qwen3")), QWEN3_SCHEDULES seeded schedules and `made()` with the F16
cache, QWEN3_KVQ8_SCHEDULES and `made()` with the Q8_0 cache.

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_multiseq_unified.py gemma3

writes tests/oracle/forward/multiseq_unified_gemma3.json: Gemma 3 270M Q4_K_M with the F16 cache, the context of
`-kvu -np 2 -c 2048` (GEMMA3_CTX: llama_kv_cache_iswa unified, a base cache of 2,048 cells and a SWA cache of
1,536), the schedules of `made_gemma3()`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.record_multiseq import (MODEL, MODEL_F16, MODEL_GEMMA3, MODEL_QWEN3, N_VOCAB_GEMMA3,  # noqa: E402
                                     batch_step, record)

OUT = REPO / "tests" / "oracle" / "forward" / "multiseq_unified.json"
N_CTX = 4096                    # -c 4096: the unified cache's cells
N_SEQ_MAX = 4                   # -np auto: 4 slots
SCHEDULES = 14                  # seeded, Q4_1 weights, F16 cache
KVQ8_SCHEDULES = 5              # seeded, Q4_1 weights, Q8_0 cache
F16_SCHEDULES = 2               # seeded, F16 weights, F16 cache
OUT_QWEN3 = REPO / "tests" / "oracle" / "forward" / "multiseq_unified_qwen3.json"
QWEN3_SCHEDULES = 6             # seeded (the first six of the llama ones), the qwen3 file, F16 cache
QWEN3_KVQ8_SCHEDULES = 3        # seeded, the qwen3 file, Q8_0 cache
OUT_GEMMA3 = REPO / "tests" / "oracle" / "forward" / "multiseq_unified_gemma3.json"
GEMMA3_CTX = (2048, 2)          # -kvu -np 2 -c 2048: SWA cache of pad(min(2048, 512 * 2 + 512), 256) = 1,536 cells
MAX_STEP_TOKENS = 1024          # a step's batch (llama-server's n_batch is 2048; kept lower for time)
LENGTHS = [1, 2, 5, 31, 63, 64, 65, 100, 130, 200, 250, 254, 300, 450, 509, 510, 600, 800]


def schedule(idx: int) -> dict:
    """A seeded schedule: steps of [seq, n_tokens, pos0, output] items in llama-server's batch order, with the
    [seq, p0, p1] seq_rm calls made before the step."""
    rng = np.random.default_rng(11000 + idx)
    n = 2 + idx % 3
    pos = [0] * n
    left = [0] * n              # prompt tokens still to process
    gen = [False] * n
    steps = []
    removed = []
    for _ in range(int(rng.integers(7, 12))):
        held = sum(pos)
        for s in range(n):
            if gen[s] and rng.random() < 0.15:          # the slot's conversation ends: its cells become holes
                gen[s] = False
                removed.append([s, -1, -1])
                held -= pos[s]
                pos[s] = 0
            elif gen[s] and pos[s] > 8 and rng.random() < 0.06:   # a new request sharing a cached prefix
                keep = int(rng.integers(1, pos[s]))
                removed.append([s, keep, -1])
                held -= pos[s] - keep
                pos[s] = keep
                gen[s] = False
                left[s] = min(int(rng.choice(LENGTHS)), N_CTX - held - 64)
                held += max(left[s], 0)
        for s in range(n):
            if not gen[s] and left[s] == 0 and not any(r[0] == s for r in removed) and rng.random() < 0.6:
                k = min(int(rng.choice(LENGTHS)), N_CTX - held - 64)
                if k > 0:
                    left[s] = k
                    held += k
        items = batch_step(gen, pos, left, MAX_STEP_TOKENS)
        if not items:
            continue
        steps.append({"removed": removed, "items": items})
        removed = []
    return {"seed": 11000 + idx, "n_seq": n, "steps": steps}


def made(seed: int) -> list[dict]:
    """Hand-made schedules (see the module's doc)."""
    # split-KV over a hole: seq 1 takes cells 0..599, seq 0 cells 600..699; seq 1 ends; seq 0 decodes alone at
    # n_kv 768 (split chunk 0..383 has none of its cells, 384..767 some); then seq 2 fills the hole beside it
    hole = [{"removed": [], "items": [[1, 600, 0, True]]},
            {"removed": [], "items": [[1, 1, 600, True], [0, 100, 0, True]]},
            {"removed": [[1, -1, -1]], "items": [[0, 1, 100, True]]},
            {"removed": [], "items": [[0, 1, 101, True]]},
            {"removed": [], "items": [[0, 1, 102, True], [2, 300, 0, True]]},
            {"removed": [], "items": [[0, 1, 103, True], [2, 1, 300, True]]},
            {"removed": [[0, -1, -1]], "items": [[2, 1, 301, True]]}]
    # split_simple's last ubatch of one prompt row (510 + 3 decode rows = 513 tokens: 512, then 1 at n_kv >= 512),
    # and ubatches cut inside a prompt beside decode rows
    cut = [{"removed": [], "items": [[0, 64, 0, True], [1, 130, 0, True], [2, 5, 0, True]]},
           {"removed": [], "items": [[0, 1, 64, True], [1, 1, 130, True], [2, 1, 5, True], [3, 510, 0, True]]},
           {"removed": [], "items": [[0, 1, 65, True], [1, 1, 131, True], [2, 1, 6, True], [3, 1, 510, True]]},
           {"removed": [[1, -1, -1]], "items": [[0, 1, 66, True], [2, 1, 7, True], [3, 1, 511, True],
                                                 [1, 1000, 0, True]]},
           {"removed": [], "items": [[0, 1, 67, True], [1, 1, 1000, True], [2, 1, 8, True], [3, 1, 512, True]]},
           {"removed": [[3, 200, -1]], "items": [[0, 1, 68, True], [1, 1, 1001, True], [2, 1, 9, True],
                                                  [3, 70, 200, True]]},
           {"removed": [], "items": [[3, 1, 270, True]]}]
    return [{"seed": seed, "n_seq": 3, "steps": hole}, {"seed": seed + 1, "n_seq": 4, "steps": cut}]


def cases() -> list[dict]:
    """Every schedule, with its weights and cache type."""
    out = []
    for idx in range(SCHEDULES):
        out.append(schedule(idx) | {"model": MODEL, "cache_type": "f16"})
    out += [c | {"model": MODEL, "cache_type": "f16"} for c in made(12000)]
    for idx in range(SCHEDULES, SCHEDULES + KVQ8_SCHEDULES):
        out.append(schedule(idx) | {"model": MODEL, "cache_type": "q8_0"})
    out += [c | {"model": MODEL, "cache_type": "q8_0"} for c in made(12010)]
    for idx in range(SCHEDULES + KVQ8_SCHEDULES, SCHEDULES + KVQ8_SCHEDULES + F16_SCHEDULES):
        out.append(schedule(idx) | {"model": MODEL_F16, "cache_type": "f16"})
    out += [c | {"model": MODEL_F16, "cache_type": "f16"} for c in made(12020)]
    return out


def cases_qwen3() -> list[dict]:
    """The qwen3 file's schedules (see the module's doc)."""
    f16 = {"model": MODEL_QWEN3, "cache_type": "f16"}
    q8 = {"model": MODEL_QWEN3, "cache_type": "q8_0"}
    out = [schedule(idx) | f16 for idx in range(QWEN3_SCHEDULES)] + [c | f16 for c in made(12100)]
    out += [schedule(idx) | q8 for idx in range(SCHEDULES, SCHEDULES + QWEN3_KVQ8_SCHEDULES)]
    return out + [c | q8 for c in made(12110)]


def made_gemma3(seed: int) -> list[dict]:
    """Gemma 3's schedules (see the module's doc): two sequences whose positions together pass the unified SWA
    cache's 1,536 cells, so that a token takes a cell of the other sequence (or its own) that left that sequence's
    window and the owner loses every position up to it; a sequence removed (holes in both caches), a prefix kept
    (seq_rm(seq, 900, -1)) and a prompt from there; decode rows beside prompt chunks."""
    long = [{"removed": [], "items": [[0, 1000, 0, True]]},
            {"removed": [], "items": [[0, 1, 1000, True], [1, 700, 0, True]]},
            {"removed": [], "items": [[0, 1, 1001, True], [1, 1, 700, True]]},
            {"removed": [[1, -1, -1]], "items": [[0, 1, 1002, True], [1, 300, 0, True]]},
            {"removed": [], "items": [[0, 1, 1003, True], [1, 1, 300, True]]},
            {"removed": [[0, 900, -1]], "items": [[1, 1, 301, True], [0, 40, 900, True]]},
            {"removed": [], "items": [[0, 1, 940, True], [1, 1, 302, True]]}]
    short = [{"removed": [], "items": [[0, 5, 0, True], [1, 64, 0, True]]},
             {"removed": [], "items": [[0, 1, 5, True], [1, 1, 64, True]]},
             {"removed": [[0, -1, -1]], "items": [[1, 1, 65, True], [0, 520, 0, True]]},
             {"removed": [], "items": [[0, 1, 520, True], [1, 1, 66, True]]}]
    return [{"seed": seed, "n_seq": 2, "steps": long}, {"seed": seed + 1, "n_seq": 2, "steps": short}]


def main() -> None:
    if sys.argv[1:] == ["gemma3"]:
        n_ctx, n_seq = GEMMA3_CTX
        record([c | {"model": MODEL_GEMMA3, "cache_type": "f16"} for c in made_gemma3(12300)], OUT_GEMMA3,
               (n_ctx, n_seq, 1), {"unified": True, "n_ctx": n_ctx, "n_seq_max": n_seq}, n_vocab=N_VOCAB_GEMMA3)
        return
    head = {"unified": True, "n_ctx": N_CTX, "n_seq_max": N_SEQ_MAX}
    if sys.argv[1:] == ["qwen3"]:
        from testing.record_forward import derived
        derived("qwen3")
        record(cases_qwen3(), OUT_QWEN3, (N_CTX, N_SEQ_MAX, 1), head)
        return
    record(cases(), OUT, (N_CTX, N_SEQ_MAX, 1), head)


if __name__ == "__main__":
    main()
