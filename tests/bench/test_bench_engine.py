"""The forward pass against llama-server b11192 `-t 2`, side by side in one run: prefill of a 484-token prompt and
greedy decode of 128 tokens after it, SmolLM2-135M-Instruct Q4_1 (the default model; BANKML_BENCH_MODEL=f16 or
q8_0 for the derived files, gemma3 for Gemma 3 270M Q4_K_M, llama-1b for the synthetic 1B model in Q4_K_M), and
the peak RSS of both processes. The prompt is the same 484 token ids for every model (valid ids in Gemma 3's
vocabulary too: speed does not depend on what they mean).

    python -m pytest tests/bench/test_bench_engine.py --benchmark-only -s

bankml: `Model.open(path, n_ctx=4096)` with its default threads (both cores), timed around `decode()` (prefill:
one call; decode: one call per token plus the argmax, as a greedy server loop does). llama-server: started from
the oracle build (`-t 2 -c 4096 -np 1`), one /completion request per round (temperature 0, cache_prompt false,
n_predict 128, the prompt as token ids), timed by the server's own `timings` (prompt_per_second,
predicted_per_second: compute only, no HTTP). The llama-server rows are skipped with a reason when the oracle
build is absent. Both sides' generated tokens are checked equal. A third column: llama-server built from the same
sdist with GGML_NATIVE=ON (testing/build_oracle.sh --native: what a user on this CPU would build; AVX-512), started
and timed alike, skipped with a reason when that build is absent; its kernels are not the oracle's, so its answers
may differ in bits: speed only, its tokens are not compared. No timing is asserted: the machine is shared;
results and the load (`os.getloadavg`) go to the benchmark's extra_info and to PERFORMANCE.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
N_DECODE = 128
RESULTS: dict[str, float] = {}


def _prompt() -> list[int]:
    rec = json.loads((ROOT / "tests" / "oracle" / "forward" / "q4_1.json").read_text())
    return next(c["prompt"] for c in rec["cases"] if c["id"] == "text-484")


PROMPT = _prompt()


@pytest.fixture(scope="module")
def model_path(request):
    which = os.environ.get("BANKML_BENCH_MODEL", "q4_1")
    if which == "llama-1b":     # the synthetic 1B model in Q4_K_M (bankml.models.synth, the records' file)
        return request.getfixturevalue("synth_q4_k_m")("llama-1b", "Q4_1")
    name = {"q4_1": "smollm2_path", "f16": "smollm2_f16_path", "q8_0": "smollm2_q8_0_path",
            "gemma3": "gemma3_path"}[which]
    return request.getfixturevalue(name)


@pytest.fixture(scope="module")
def model(model_path):
    from bankml.engine import Model
    m = Model.open(model_path, n_ctx=4096)
    yield m
    m.close()


def _greedy(m, n):
    pos = len(PROMPT)
    out = []
    for _ in range(n):
        tok = int(np.argmax(m.logits()))
        out.append(tok)
        m.decode([tok], pos)
        pos += 1
    return out


def test_bankml_prefill(benchmark, model):
    benchmark.group = "prefill 484 tokens"

    def run():
        model.cache.clear()
        model.decode(PROMPT, 0)

    benchmark.pedantic(run, rounds=5, warmup_rounds=1)
    RESULTS["bankml_prefill_tps"] = len(PROMPT) / benchmark.stats.stats.median
    benchmark.extra_info.update(tokens_per_s=RESULTS["bankml_prefill_tps"], threads=model.n_threads,
                                load=os.getloadavg()[0])


def test_bankml_decode(benchmark, model):
    benchmark.group = f"decode {N_DECODE} tokens after 484"

    def setup():
        model.cache.clear()
        model.decode(PROMPT, 0)

    tokens = []
    benchmark.pedantic(lambda: tokens.append(_greedy(model, N_DECODE)), setup=setup, rounds=3, warmup_rounds=1)
    RESULTS["bankml_decode_tps"] = N_DECODE / benchmark.stats.stats.median
    RESULTS["bankml_tokens"] = tokens[-1]
    benchmark.extra_info.update(tokens_per_s=RESULTS["bankml_decode_tps"], load=os.getloadavg()[0])


def _server():
    oracle_dir = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
    if not (oracle_dir / "build" / "bin" / "llama-server").exists():
        pytest.skip("llama-server of the oracle build is not there (testing/build_oracle.sh)")
    sys.path.insert(0, str(ROOT))
    from testing.oracle import LlamaServer
    return LlamaServer


def _vm_hwm_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def native_binary() -> Path:
    """llama-server built with GGML_NATIVE=ON (testing/build_oracle.sh --native)."""
    oracle_dir = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
    return oracle_dir / "build-native" / "bin" / "llama-server"


def native_server_class():
    LlamaServer = _server()
    if not native_binary().exists():
        pytest.skip(f"no GGML_NATIVE=ON llama-server at {native_binary()} (testing/build_oracle.sh --native): "
                    "the native column is left out")
    return LlamaServer


@pytest.fixture(scope="module")
def server(model_path):
    LlamaServer = _server()
    with LlamaServer(model_path) as srv:
        yield srv


@pytest.fixture(scope="module")
def native_server(model_path):
    LlamaServer = native_server_class()
    with LlamaServer(model_path, binary=native_binary()) as srv:
        yield srv


@pytest.mark.parametrize("which", ["server", "native"])
def test_llama_server_prefill_and_decode(benchmark, request, which):
    # which: "server" (the oracle build) or "native" (GGML_NATIVE=ON: speed only, its bits may differ)
    srv = request.getfixturevalue("server" if which == "server" else "native_server")
    benchmark.group = ("llama-server b11192 -t 2: one /completion (484 + 128)" if which == "server" else
                       "llama-server b11192 GGML_NATIVE=ON -t 2: one /completion (484 + 128), speed only")
    body = {"prompt": PROMPT, "n_predict": N_DECODE, "temperature": 0, "cache_prompt": False,
            "return_tokens": True}
    timings = []

    def run():
        st, res = srv.post_json("/completion", body)
        assert st == 200, res
        timings.append(res)

    benchmark.pedantic(run, rounds=5, warmup_rounds=1)
    res = timings[1:] or timings
    RESULTS[f"{which}_prefill_tps"] = float(np.median([r["timings"]["prompt_per_second"] for r in res]))
    RESULTS[f"{which}_decode_tps"] = float(np.median([r["timings"]["predicted_per_second"] for r in res]))
    RESULTS[f"{which}_tokens"] = res[-1]["tokens"]
    RESULTS[f"{which}_rss_mib"] = _vm_hwm_kb(srv.proc.pid) / 1024
    benchmark.extra_info.update(prefill_tokens_per_s=RESULTS[f"{which}_prefill_tps"],
                                decode_tokens_per_s=RESULTS[f"{which}_decode_tps"],
                                peak_rss_mib=RESULTS[f"{which}_rss_mib"], load=os.getloadavg()[0])


def test_bankml_peak_rss(benchmark, model_path):
    # a fresh process: open, prefill, 128 decode steps; its peak RSS (the test process holds pytest and more)
    benchmark.group = "peak RSS"
    code = ("import sys, resource, numpy as np; from bankml.engine import Model;"
            f"p = {PROMPT!r}; m = Model.open(sys.argv[1], n_ctx=4096); m.decode(p, 0); n = len(p)\n"
            f"for i in range({N_DECODE}): m.decode([int(np.argmax(m.logits()))], n + i)\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = benchmark.pedantic(lambda: subprocess.run([sys.executable, "-c", code, str(model_path)], check=True,
                                                    capture_output=True, text=True).stdout, rounds=1)
    RESULTS["bankml_rss_mib"] = int(out.split()[-1]) / 1024
    benchmark.extra_info["peak_rss_mib"] = RESULTS["bankml_rss_mib"]


def test_ratios(benchmark):
    benchmark.group = "ratios (bankml / llama-server)"
    need = ("bankml_prefill_tps", "bankml_decode_tps", "server_prefill_tps", "server_decode_tps")
    if not all(k in RESULTS for k in need):
        pytest.skip("both sides must have run in this session")
    server_tokens = RESULTS["server_tokens"]  # may stop early at an end-of-generation token
    assert RESULTS["bankml_tokens"][:len(server_tokens)] == server_tokens
    ratios = {"prefill": RESULTS["bankml_prefill_tps"] / RESULTS["server_prefill_tps"],
              "decode": RESULTS["bankml_decode_tps"] / RESULTS["server_decode_tps"]}
    if "bankml_rss_mib" in RESULTS and "server_rss_mib" in RESULTS:
        ratios["peak_rss"] = RESULTS["bankml_rss_mib"] / RESULTS["server_rss_mib"]
    if "native_decode_tps" in RESULTS:      # speed only: the native build's bits may differ
        ratios["prefill_vs_native"] = RESULTS["bankml_prefill_tps"] / RESULTS["native_prefill_tps"]
        ratios["decode_vs_native"] = RESULTS["bankml_decode_tps"] / RESULTS["native_decode_tps"]
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update({k: round(v, 3) for k, v in ratios.items()})
    benchmark.extra_info.update({k: (round(v, 1) if isinstance(v, float) else None) for k, v in RESULTS.items()
                                 if isinstance(v, float)})
    print("\nbankml / llama-server:", {k: round(v, 3) for k, v in ratios.items()},
          {k: round(v, 1) for k, v in RESULTS.items() if isinstance(v, float)}, "load", os.getloadavg())

