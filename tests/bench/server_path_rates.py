"""The decode rate of each path side by side in one run (issue 17), with the per-token accounting that says why:

    python tests/bench/server_path_rates.py                 # N=32 ROUNDS=2 WHICH=engine,api,http,http_stream
    BEFORE=1 python tests/bench/server_path_rates.py        # Model.open keeping the opening thread's OpenMP pool
    GOMP_SPINCOUNT=100 python tests/bench/server_path_rates.py

Paths: the engine alone (its own process: opened and decoded on the main thread, Model.decode + argmax),
bankml.Engine in-process, bankml-serve over loopback HTTP (plain and stream); SmolLM2 Q4_1, the 484-token prompt,
N greedy tokens, cache_prompt false. Each line: the rate (the server's own timings.predicted_per_second; the
engine's loop by wall clock), the load average, and the voluntary context switches per token over all threads of
the process that decodes (a barrier that sleeps on a futex is one). BEFORE=1 stubs out release_pool, as the tree
was before the fix (PERFORMANCE.md, "The server path at the engine's rate"). Not a pytest file: it prints."""
import json, os, sys, time, http.client, shutil, subprocess
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]; sys.path.insert(0, str(ROOT))
BEFORE = os.environ.get("BEFORE") == "1"
import bankml.engine.model as bm
if BEFORE:
    bm.release_pool = lambda: 0
import numpy as np
from testing.oracle import LlamaServer
MODEL = Path.home() / ".local/share/bankml/models/smollm2-135m-instruct-q4_1.gguf"
rec = json.loads((ROOT / "tests/oracle/forward/q4_1.json").read_text())
PROMPT = next(c["prompt"] for c in rec["cases"] if c["id"] == "text-484")
N = int(os.environ.get("N", 64)); ROUNDS = int(os.environ.get("ROUNDS", 2))
WHICH = os.environ.get("WHICH", "engine,api,http,http_stream").split(",")
BODY = {"prompt": PROMPT, "n_predict": N, "temperature": 0, "cache_prompt": False}
tag = "before" if BEFORE else "after"
def vol(pid):
    tot = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            s = open(f"/proc/{pid}/task/{tid}/status").read()
            tot += int(s.split("\nvoluntary_ctxt_switches:")[1].split()[0])
        except FileNotFoundError:
            pass
    return tot
def out(name, rate, v):
    print(f"{time.strftime('%H:%M:%S')} {tag:6s} {name:26s} {rate:7.1f} t/s  load {os.getloadavg()[0]:5.2f}  "
          f"voluntary switches/token (all threads) {v:6.1f}", flush=True)
def stream_post(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    conn.request("POST", "/completion", body=json.dumps(dict(BODY, stream=True)).encode(),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse(); last = None
    while True:
        line = r.readline()
        if not line: break
        if line.startswith(b"data: "): last = json.loads(line[6:])
    conn.close(); return last
if "engine" in WHICH:
    # its own process: the engine alone, opened and decoded on the main thread (no other pool)
    code = f"""
import json, os, time, numpy as np, bankml.engine.model as bm
{'bm.release_pool = lambda: 0' if BEFORE else ''}
from bankml.engine import Model
p = {PROMPT!r}; m = Model.open({str(MODEL)!r}, n_ctx=4096)
def vol():
    t = 0
    for tid in os.listdir('/proc/self/task'):
        s = open(f'/proc/self/task/{{tid}}/status').read(); t += int(s.split('\\nvoluntary_ctxt_switches:')[1].split()[0])
    return t
for r in range({ROUNDS} + 1):
    m.cache.clear(); m.decode(p, 0); pos = len(p); v0 = vol(); t0 = time.perf_counter()
    for _ in range({N}):
        m.decode([int(np.argmax(m.logits()))], pos); pos += 1
    if r: print({N} / (time.perf_counter() - t0), (vol() - v0) / {N}, flush=True)
"""
    pr = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    for line in pr.stdout:
        a, b = line.split(); out("engine alone", float(a), float(b))
    pr.wait()
if "api" in WHICH:
    import bankml
    eng = bankml.Engine(["-m", str(MODEL), "-t", "2", "-c", "4096", "-np", "1"])
    for r in range(ROUNDS + 1):
        v0 = vol(os.getpid()); a = eng.completion(BODY); v = (vol(os.getpid()) - v0) / N
        r and out("bankml.Engine", a["timings"]["predicted_per_second"], v)
    eng.close()
if "http" in WHICH or "http_stream" in WHICH:
    binary = shutil.which("bankml-serve", path=str(Path(sys.executable).parent))
    srv = LlamaServer(MODEL, binary=binary)
    if BEFORE:
        srv.args = [sys.executable, "-c", "import sys, bankml.engine.model as m; m.release_pool = lambda: 0; "
                    "from bankml.server.cli import main; sys.argv[0] = 'bankml-serve'; sys.exit(main())"] + srv.args[1:]
    with srv as s:
        for r in range(ROUNDS + 1):
            if "http" in WHICH:
                v0 = vol(s.proc.pid); st, a = s.post_json("/completion", BODY); v = (vol(s.proc.pid) - v0) / N
                r and out("bankml-serve HTTP", a["timings"]["predicted_per_second"], v)
            if "http_stream" in WHICH:
                v0 = vol(s.proc.pid); a = stream_post(s.port); v = (vol(s.proc.pid) - v0) / N
                r and out("bankml-serve HTTP stream", a["timings"]["predicted_per_second"], v)
