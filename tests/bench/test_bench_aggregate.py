"""Aggregate decode over HTTP with concurrent streams: bankml-serve and llama-server b11192 started alike with
`-t 2 -c 4096 -np P --jinja --reasoning off --no-webui` (an explicit -np: a split KV cache on both, which is
where bankml-serve batches the slots' decode steps), P = 4 and 8, and 1, 2, 4 and 8 clients at once, each a
streamed /completion of a short prompt with 64 greedy tokens (`ignore_eos`, `cache_prompt` false). Side by side
in one run, the same requests:

    python -m pytest tests/bench/test_bench_aggregate.py --benchmark-only -s

Each row's extra_info: the aggregate rate (all clients' tokens / the wall time from the first request sent to the
last answer read), the median time to first token (first SSE event with content, measured at the client) and the
server's peak RSS (VmHWM) after the row. A GGML_NATIVE=ON llama-server (testing/build_oracle.sh --native) runs the
same rows when its build exists (speed only: its bits may differ). No timing is asserted; the figures go to
PERFORMANCE.md.
"""

from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from test_bench_engine import ROOT, _server, _vm_hwm_kb, native_binary, native_server_class
from test_bench_http import _bankml_serve

pytestmark = pytest.mark.slow

N_NEW = 64
CLIENTS = [1, 2, 4, 8]
SLOTS = [4, 8]
WHO = ["bankml-serve", "llama-server", "llama-server-native"]
RATES: dict[tuple[str, int, int], float] = {}


def body(i: int) -> dict:
    return {"prompt": f"Story number {i}: once upon a time", "n_predict": N_NEW, "temperature": 0,
            "cache_prompt": False, "ignore_eos": True, "stream": True}


def _args(np_: int) -> list[str]:
    return ["-t", "2", "-c", "4096", "-np", str(np_), "--jinja", "--reasoning", "off", "--no-webui"]


@pytest.fixture(scope="module", params=SLOTS)
def slots(request):
    return request.param


@pytest.fixture(scope="module")
def servers(smollm2_path, slots):
    """The servers of one -np, started one after another (never two at once: they would share the 2 cores)."""
    LlamaServer = _server()          # skips without the oracle build
    sys.path.insert(0, str(ROOT))
    return {"bankml-serve": lambda: LlamaServer(smollm2_path, binary=_bankml_serve(), base_args=_args(slots)),
            "llama-server": lambda: LlamaServer(smollm2_path, base_args=_args(slots)),
            "llama-server-native": lambda: native_server_class()(smollm2_path, binary=native_binary(),
                                                                 base_args=_args(slots))}


def _one(srv, i: int) -> tuple[int, float, float]:
    """(tokens, seconds to the first token, seconds to the end) of one streamed request."""
    import http.client
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
    conn.request("POST", "/completion", body=json.dumps(body(i)).encode(),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    assert r.status == 200
    first, n = None, 0
    for line in r:
        if not line.startswith(b"data: "):
            continue
        ev = json.loads(line[6:])
        if ev.get("content") and first is None:
            first = time.perf_counter() - t0
        n = max(n, ev.get("tokens_predicted", 0) or 0)
        if ev.get("stop"):
            break
    conn.close()
    return n, first if first is not None else float("nan"), time.perf_counter() - t0


@pytest.mark.parametrize("clients", CLIENTS)
@pytest.mark.parametrize("who", WHO)
def test_aggregate(benchmark, servers, slots, who, clients):
    benchmark.group = f"aggregate decode, -np {slots}, {clients} streams"
    if clients > slots:
        pytest.skip("more clients than slots: the rest queue")
    with servers[who]() as srv:
        _one(srv, 0)                 # warm up
        seen = []

        def run():
            t0 = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                res = list(pool.map(lambda i: _one(srv, i), range(clients)))
            seen.append((sum(r[0] for r in res), time.perf_counter() - t0, sorted(r[1] for r in res)))

        benchmark.pedantic(run, rounds=3, warmup_rounds=0)
        rss = _vm_hwm_kb(srv.proc.pid) / 1024
    rates = sorted(tok / wall for tok, wall, _ in seen)
    ttft = sorted(t for _, _, ts in seen for t in ts)
    RATES[who, slots, clients] = rates[len(rates) // 2]
    benchmark.extra_info.update(tokens_per_s=round(rates[len(rates) // 2], 1),
                                ttft_ms=round(1000 * ttft[len(ttft) // 2], 1), peak_rss_mib=round(rss, 1),
                                load=os.getloadavg()[0])


def test_aggregate_ratios(benchmark):
    benchmark.group = "aggregate ratios"
    if not RATES:
        pytest.skip("no aggregate row ran in this session")
    out = {}
    for (who, np_, c), r in RATES.items():
        if who == "bankml-serve":
            if (who, np_, 1) in RATES:
                out[f"np{np_} x{c} / x1"] = round(r / RATES[who, np_, 1], 3)
            for other in WHO[1:]:
                if (other, np_, c) in RATES:
                    out[f"np{np_} x{c} vs {other}"] = round(r / RATES[other, np_, c], 3)
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update(out)
    print("\naggregate tokens/s:", {f"{w} np{p} x{c}": round(r, 1) for (w, p, c), r in RATES.items()},
          "\nratios:", out, "load", os.getloadavg())
