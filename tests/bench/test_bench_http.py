"""What a user sees over HTTP: bankml-serve and llama-server b11192 started the same way (`-t 2 -c 4096 -np 1
--jinja --reasoning off --no-webui`, loopback), the same requests, timed at the client (wall clock, HTTP and JSON
included), side by side in one run:

    python -m pytest tests/bench/test_bench_http.py --benchmark-only -s

- "long": /completion of the 484-token prompt (as token ids) with 128 greedy tokens, cache_prompt false;
- "long-stream": the same request with stream true (one SSE event per token, read to the end);
- "chat": a one-line /v1/chat/completions with 8 greedy tokens, cache_prompt false (the per-request overhead).
Each row's extra_info also has the server's own decode rate (`timings.predicted_per_second`, median), the figure
to set beside the engine's (tests/bench/test_bench_engine.py) in the same run. Both servers' tokens are checked
equal. A third server, llama-server built with GGML_NATIVE=ON (testing/build_oracle.sh --native), runs the same
rows when its build exists (skipped with a reason when not); its kernels use AVX-512, so its answers may differ in
bits: speed only, never compared. The llama-server rows are skipped with a reason when the oracle build is
absent. No timing is asserted; the ratios and the load go to extra_info and to PERFORMANCE.md. Where the CPU
package's energy counter is readable (bankml.server.energy), each row's extra_info also has the package energy
per generated token over its rounds (`energy_per_token_j`; the whole package, this client included), for both
servers alike; absent where it is not.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from bankml.server import energy
from test_bench_engine import N_DECODE, PROMPT, ROOT, _server, native_binary, native_server_class

pytestmark = pytest.mark.slow

LONG = {"prompt": PROMPT, "n_predict": N_DECODE, "temperature": 0, "cache_prompt": False, "return_tokens": True}
CHAT = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 8,
        "temperature": 0, "cache_prompt": False}
CASES = {"long": ("/completion", LONG), "long-stream": ("/completion", dict(LONG, stream=True)),
         "chat": ("/v1/chat/completions", CHAT)}
NATIVE = "llama-server-native"
TIMES: dict[tuple[str, str], float] = {}
ANSWERS: dict[tuple[str, str], object] = {}


def _bankml_serve() -> str:
    exe = shutil.which("bankml-serve", path=str(Path(sys.executable).parent))
    if not exe:
        pytest.skip("the bankml-serve console script is not installed next to this python")
    return exe


@pytest.fixture(scope="module")
def servers(smollm2_path):
    LlamaServer = _server()          # skips without the oracle build
    sys.path.insert(0, str(ROOT))
    with LlamaServer(smollm2_path, binary=_bankml_serve()) as ours, LlamaServer(smollm2_path) as theirs:
        yield {"bankml-serve": ours, "llama-server": theirs}


@pytest.fixture(scope="module")
def native(smollm2_path):
    LlamaServer = native_server_class()     # skips without the GGML_NATIVE=ON build
    with LlamaServer(smollm2_path, binary=native_binary()) as srv:
        yield srv


def _answer(case: str, res: dict):
    if case == "long-stream":
        return [t for c in res["chunks"] for t in c.get("tokens", [])]
    return res["tokens"] if case == "long" else res["choices"][0]["message"]["content"]


def _post(srv, path: str, body: dict):
    if not body.get("stream"):
        return srv.post_json(path, body)
    st, _, payload = srv.post(path, body)
    chunks = [json.loads(line[6:]) for line in payload.split(b"\n") if line.startswith(b"data: ")]
    return st, {"chunks": chunks, "timings": chunks[-1]["timings"]}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("who", ["bankml-serve", "llama-server", NATIVE])
def test_request(benchmark, request, case, who):
    benchmark.group = f"http {case}"
    path, body = CASES[case]
    srv = request.getfixturevalue("native") if who == NATIVE else request.getfixturevalue("servers")[who]
    seen = []

    def run():
        st, res = _post(srv, path, body)
        assert st == 200, res
        seen.append(res)

    e0 = energy.read()
    benchmark.pedantic(run, rounds=5 if case.startswith("long") else 20, warmup_rounds=1)
    e1 = energy.read()
    TIMES[who, case] = benchmark.stats.stats.median
    ANSWERS[who, case] = _answer(case, seen[-1])
    rates = sorted(r["timings"]["predicted_per_second"] for r in seen)
    benchmark.extra_info.update(median_s=TIMES[who, case], load=os.getloadavg()[0],
                                decode_tokens_per_s=rates[len(rates) // 2])
    generated = sum(r["timings"]["predicted_n"] for r in seen)
    if e0 is not None and e1 is not None and generated:
        benchmark.extra_info["energy_per_token_j"] = (e1 - e0) / 1e6 / generated


def test_http_ratios(benchmark):
    benchmark.group = "http ratios (llama-server time / bankml-serve time: > 1, bankml is faster)"
    if any((w, c) not in TIMES for w in ("bankml-serve", "llama-server") for c in CASES):
        pytest.skip("both servers must have run every case in this session")
    for case in CASES:
        assert ANSWERS["bankml-serve", case] == ANSWERS["llama-server", case]
    ratios = {case: TIMES["llama-server", case] / TIMES["bankml-serve", case] for case in CASES}
    # the GGML_NATIVE=ON build: speed only (its bits may differ)
    ratios.update({f"{case} vs native": TIMES[NATIVE, case] / TIMES["bankml-serve", case] for case in CASES
                   if (NATIVE, case) in TIMES})
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update({k: round(v, 3) for k, v in ratios.items()})
    print("\nHTTP, llama-server / bankml-serve time:", {k: round(v, 3) for k, v in ratios.items()},
          {f"{w} {c}": round(t * 1000, 1) for (w, c), t in TIMES.items()}, "ms; load", os.getloadavg())
