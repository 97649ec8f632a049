"""Replay a load run of bankml-serve through libllama b11192: start bankml-serve as llama-server's user would
(`-t 2 -c 4096 -np auto`: four slots on one unified KV cache, continuous batching), send it overlapping
/completion requests from several clients, then take the run's debug log (`-v`) — every view's rows
(`batch: step S, view V: slot I D (decode|prompt) at P`, bankml.server.batching) and every change to the cache
outside a decode (`kv: seq_rm S P0 P1`, bankml.engine.model.UnifiedCache) — and play the same batches, in the
same order, through libllama with llama-server's context for those flags (testing/libllama_multiseq_shim.c). Each
output row's argmax must be the token bankml-serve sent back: the recorder stops with the first that is not.

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_load.py [--clients 5] [--requests 5]

writes tests/oracle/server/load_run.json: the schedule (each view with the cache changes before it, its rows'
tokens, positions and output flags), libllama's output rows (sha256 of the float32 bytes, first 24 hex digits,
and argmax) and the tokens bankml-serve served; tests/test_load_replay.py plays the schedule through
Model.decode_unified and needs the rows to be libllama's.

The requests: client c's prompts are token ids (a seeded draw, engine_replay.lcg_tokens) of a base of its own plus
a different tail each request, so a client's next request finds its prefix in a slot (llama-server keeps it:
seq_rm S n_keep -1); more clients than slots, so requests wait for a slot and take over other clients' slots;
greedy (temperature 0), return_tokens; then one more request from each client whose request a slot
answered last, sent together once every slot is idle (each finds its prefix in its slot). `--cache-ram 0`: no host prompt cache, whose restored cells were computed
outside the run (a `kv: restore` line stops the replay with that reason).

How a row's tokens are found: per slot, the requests bankml-serve answered from it (its id_slot), in the order
they finished; a prompt row at P holds the request's prompt[P:P + D] (a new request begins on a slot at a prompt
row after the previous request's last row); a decode row at P holds the generated token number P - len(prompt).
"""

from __future__ import annotations

import argparse
import ctypes as C
import hashlib
import json
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from engine_replay import lcg_tokens, row_hash  # noqa: E402
from testing.oracle import model_path  # noqa: E402
from testing.record_multiseq import MODEL, N_VOCAB, THREADS, shim  # noqa: E402

OUT = REPO / "tests" / "oracle" / "server" / "load_run.json"
N_CTX = 4096
N_SEQ = 4                       # -np auto
FLAGS = ["-t", str(THREADS), "-c", str(N_CTX), "--jinja", "--reasoning", "off", "--no-webui", "--cache-ram", "0",
         "-v"]
BASES = [30, 260, 120, 480, 60, 700, 15, 200]     # client c's base prompt length (c % 8)

VIEW = re.compile(r"batch: step (\d+), view (\d+): (.*)$")
ROW = re.compile(r"slot (\d+) (\d+) \((prompt|decode)\) at (\d+)")
KV = re.compile(r"kv: (seq_rm (-?\d+) (-?\d+) (-?\d+)|clear|restore (\d+) (\d+))$")


def requests_of(client: int, n: int) -> list[dict]:
    draw = lcg_tokens(7000 + client, N_VOCAB)
    base = draw(BASES[client % len(BASES)])
    out = []
    for r in range(n):
        tail = draw(5 + 7 * r + client)
        out.append({"prompt": base + tail, "n_predict": 4 + (3 * client + 5 * r) % 13, "temperature": 0,
                    "return_tokens": True, "cache_prompt": True})
    return out


def run_load(clients: int, n_requests: int) -> tuple[list[dict], list[str]]:
    """Serve the clients' requests on bankml-serve; returns the answers (with when each finished) and its log."""
    import server_replay as sr
    answers, lock = [], threading.Lock()

    def client(c: int, first: int, n: int) -> None:
        time.sleep(0.05 * c)
        for r, body in list(enumerate(requests_of(c, n)))[first:]:
            status, _, data = sr.send(srv.port, {"method": "POST", "path": "/completion", "body": body})
            res = json.loads(data)
            assert status == 200, (status, res)
            with lock:
                answers.append({"client": c, "request": r, "t_done": time.monotonic(), "id_slot": res["id_slot"],
                                "prompt": body["prompt"], "tokens": res["tokens"],
                                "cached": res["timings"]["cache_n"]})

    with sr.BankmlServe(["-m", str(model_path(MODEL))] + FLAGS) as srv:
        # every client's requests, then one more from each client whose request a slot answered last, sent
        # together (the slots idle: each finds the slot holding its prefix)
        for phase in range(2):
            if phase == 0:
                runs = [(c, 0, n_requests) for c in range(clients)]
            else:
                last = {a["id_slot"]: a["client"] for a in sorted(answers, key=lambda a: a["t_done"])}
                runs = [(c, n_requests, n_requests + 1) for c in sorted(set(last.values()))]
            threads = [threading.Thread(target=client, args=args) for args in runs]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        time.sleep(0.5)
        log = srv.read_log().decode(errors="replace").splitlines()
    return answers, log


def schedule(answers: list[dict], log: list[str]) -> list[dict]:
    """The run's views in order, each {"removed": [[s, p0, p1], ...], "items": [[s, tokens, p0, out], ...],
    "served": [token expected at each output]}, the tokens found from the answers (module doc)."""
    queue = {s: sorted((a for a in answers if a["id_slot"] == s), key=lambda a: a["t_done"]) for s in range(N_SEQ)}
    cur = {s: None for s in range(N_SEQ)}        # the request a slot is at, and whether its prompt is done
    done = {s: True for s in range(N_SEQ)}
    steps, removed = [], []
    for ln in log:
        m = KV.search(ln)
        if m:
            if m.group(1) == "clear":
                removed.append([-1, -1, -1])
            elif m.group(1).startswith("restore"):
                raise SystemExit(f"the run restored cells computed outside it ({ln.strip()}): not replayable")
            else:
                removed.append([int(m.group(2)), int(m.group(3)), int(m.group(4))])
            continue
        m = VIEW.search(ln)
        if not m:
            continue
        items, served = [], []
        for s, d, kind, p in ROW.findall(m.group(3)):
            s, d, p = int(s), int(d), int(p)
            if kind == "prompt":
                if done[s]:                         # a new request on this slot
                    cur[s], done[s] = queue[s].pop(0), False
                a = cur[s]
                toks = a["prompt"][p:p + d]
                assert len(toks) == d, f"slot {s}: prompt rows {p}..{p + d} past the prompt ({len(a['prompt'])})"
                out = p + d == len(a["prompt"])
                if out:
                    served.append(a["tokens"][0])
            else:
                a = cur[s]
                j = p - len(a["prompt"])
                toks = [a["tokens"][j]]
                out = True
                served.append(a["tokens"][j + 1])
                if j + 2 == len(a["tokens"]):       # the last generated token is never decoded
                    done[s] = True
            if kind == "prompt" and out and len(a["tokens"]) == 1:
                done[s] = True
            items.append([s, toks, p, out])
        steps.append({"step": int(m.group(1)), "view": int(m.group(2)), "removed": removed, "items": items,
                      "served": served})
        removed = []
    left = {s: len(q) for s, q in queue.items() if q}
    assert not left, f"answers with no rows in the log: {left}"
    return steps


def replay(steps: list[dict]) -> int:
    """Play the schedule through libllama; each output row's hash and argmax go into its step. Returns the rows."""
    lib = shim()
    h = lib.mshim_open(str(model_path(MODEL)).encode(), N_CTX, N_SEQ, 1, THREADS, 0)
    assert h, "libllama refused the context"
    rows = 0
    try:
        for i, st in enumerate(steps):
            for s, p0, p1 in st["removed"]:
                lib.mshim_seq_rm_range(h, s, p0, p1)
            tok, pos, seq, out, last = [], [], [], [], []
            for s, toks, p0, o in st["items"]:
                tok += toks
                pos += range(p0, p0 + len(toks))
                seq += [s] * len(toks)
                out += [0] * (len(toks) - 1) + [1 if o else 0]
                if o:
                    last.append(len(tok) - 1)
            n = len(tok)
            rc = lib.mshim_decode(h, (C.c_int * n)(*tok), (C.c_int * n)(*pos), (C.c_int * n)(*seq),
                                  (C.c_byte * n)(*out), n)
            assert rc == 0, f"view {i}: llama_decode returned {rc}"
            st["rows"], st["argmax"] = [], []
            for k in last:
                row = np.ctypeslib.as_array(lib.mshim_logits(h, k), shape=(N_VOCAB,)).copy()
                st["rows"].append(row_hash(row))
                st["argmax"].append(int(np.argmax(row)))
            bad = [(j, a, b) for j, (a, b) in enumerate(zip(st["argmax"], st["served"])) if a != b]
            if bad:
                raise SystemExit(f"view {i} (step {st['step']}): libllama's argmax differs from the served token "
                                 f"at outputs {bad}; items {[(s, len(t), p, o) for s, t, p, o in st['items']]}")
            rows += len(last)
    finally:
        lib.mshim_close(h)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--requests", type=int, default=5)
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    t0 = time.time()
    answers, log = run_load(a.clients, a.requests)
    steps = schedule(answers, log)
    n_items = sum(len(st["items"]) for st in steps)
    several = sum(1 for st in steps if len({it[0] for it in st["items"]}) > 1)
    print(f"{len(answers)} answers, {len(steps)} views ({several} with several slots), {n_items} items, "
          f"{sum(1 for a in answers if a['cached'])} answers with cached tokens, {time.time() - t0:.0f} s",
          flush=True)
    rows = replay(steps)
    print(f"libllama: {rows} output rows, every argmax the served token ({time.time() - t0:.0f} s)")
    rec = {"oracle": "llama.cpp b11192 libllama, haswell CPU build; the schedule from a bankml-serve run",
           "model_sha256": {MODEL: hashlib.sha256(model_path(MODEL).read_bytes()).hexdigest()},
           "flags": FLAGS, "n_ctx": N_CTX, "n_seq": N_SEQ, "threads": THREADS, "n_vocab": N_VOCAB,
           "clients": a.clients, "requests": a.requests, "answers": len(answers), "rows": rows,
           "views_several_slots": several, "steps": steps}
    a.out.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
