"""Record llama-server b11192 serving overlapping requests on several slots (continuous batching), for
tests/test_server_batching.py: tests/oracle/server/batching.json.

    python -m testing.record_batching [--check] [NAME ...]     # NAMEs: only these schedules, the others kept

Each schedule runs on a fresh `llama-server -np 2 -v` (the contract's flags otherwise): request A streams on one
slot; once A has streamed `after[name]` chunks, B and C are posted (at -np 2 with the same count, B first): the first of them to reach the server takes
the other slot and joins A's decode steps, the second finds no idle slot and is deferred until one ends, then
joins the remaining one. Which step the second request joined at, and which of B and C it was, depend on timing,
so they are read back from llama-server's own debug log (its `new prompt ... task.n_tokens` lines, named by the
prompt's length, and the last `n_gen = ` line of each live task before them): the record holds, per prompt start,
the other tasks' counts of sampled tokens, and the replay submits the second request at the same point and the
third right after it. The third's start then follows from the rules alone (a released slot puts the deferred
task first in the queue). Each request is also recorded alone, on a fresh server, for the comparison of
a batched answer with the answer served alone.

    python -m testing.record_batching --qwen3 [--check] [NAME ...]

records QWEN3_SCHEDULES on the Q4_1 file re-described as qwen3 (testing/record_forward.py derived("qwen3"); the
record keeps its sha256) into tests/oracle/server/batching_qwen3.json instead.

    python -m testing.record_batching --gemma3 [--check] [NAME ...]

records GEMMA3_SCHEDULES on Gemma 3 270M Q4_K_M (sliding-window layers; testing/oracle.py model_path("gemma3"))
into tests/oracle/server/batching_gemma3.json. These schedules may have `pre` requests, posted one after the other
on the fresh server before A (a conversation's first turn): a later request given as a function of the answers so
far is built once they are in (the conversation's next turn, on the slot that holds the first, through its
context checkpoints). Their prompts are Gemma's chat turns sent to /completion with the template's
`message_delimiters`, so llama-server cuts its batches and makes its checkpoints at the user messages.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from pathlib import Path

from testing.oracle import LlamaServer, model_path
from testing import server_sessions as ss

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "oracle" / "server" / "batching.json"

P = "/completion"


def body(prompt: str, n: int, **kw) -> dict:
    return {"prompt": prompt, "n_predict": n, "temperature": 0, "n_probs": 2, "return_tokens": True, **kw}


FLAGS = ss.flags("-v", np="2")

# after: per later request, how many streamed chunks of A come before it is posted (requests with the same count
# are posted in this order, 50 ms apart)
SCHEDULES = [
    {"name": "greedy_np2", "after": {"B": 4, "C": 4},
     "A": body("The history of the city of Paris begins", 40, stream=True),
     "B": body("Three facts about the moon:", 14),
     "C": body("A short poem about bread:\n", 12)},
    {"name": "sampled_np2", "after": {"B": 9, "C": 9},
     "A": body("Write a story about a robot who", 36, stream=True, temperature=0.9, seed=7),
     "B": body("The best way to learn a language is", 18, temperature=0.7, seed=11),
     "C": body("Here is a list of fruits:\n1.", 10, temperature=1.1, seed=3)},
    {"name": "long_prompts_np2", "after": {"B": 2, "C": 2},
     "A": body("Once upon a time " * 40 + "there was", 30, stream=True),
     "B": body("The ocean is " * 70 + "and", 12),
     "C": body("Rain falls on " * 20, 8)},
    # A's cells pass 512: alone, its decode rows take the split-KV attention path; batched with another stream,
    # never (docs/engine.md): here a row's bits may depend on the batch
    {"name": "split_kv_np2", "after": {"B": 3, "C": 3},
     "A": body("The river flows to the sea. " * 75 + "And then", 24, stream=True),
     "B": body("Snow is white and " * 30, 16),
     "C": body("Numbers: 1, 2, 3,", 10)},
    # -b 64 -ub 16: B's and C's prompts go in over several steps, 63 tokens beside A's row, each llama_decode cut
    # into ubatches of 16 (split_equal: A's row and one of B's, then B's alone)
    {"name": "small_batch_np2", "flags": ss.flags("-v", "-b", "64", "-ub", "16", np="2"), "after": {"B": 3, "C": 3},
     "A": body("The mountain village " * 25 + "was", 30, stream=True),
     "B": body("A list of colours: red, green, blue, " * 18 + "and", 12),
     "C": body("Dogs and cats " * 45, 8)},
    # three slots: B and C each join A at their own step (no deferral), all three decode together
    {"name": "three_slots_np3", "flags": ss.flags("-v", "-b", "64", "-ub", "16", np="3"),
     "after": {"B": 3, "C": 10},
     "A": body("Tell me about the stars in the night sky", 36, stream=True, ignore_eos=True),
     "B": body("Green is the colour of " * 8, 20, temperature=0.8, seed=5),
     "C": body("The train leaves the station " * 12, 14)},
    # one unified KV stream (-kvu): the slots' cells interleave in one cache (docs/engine.md "A unified cache");
    # the second pair's A passes 512 cells beside the others' (n_kv counts every slot's cells)
    {"name": "greedy_kvu_np2", "flags": ss.flags("-v", "-kvu", np="2"), "after": {"B": 4, "C": 4},
     "A": body("The history of the city of Paris begins", 40, stream=True),
     "B": body("Three facts about the moon:", 14),
     "C": body("A short poem about bread:\n", 12)},
    {"name": "split_kv_kvu_np2", "flags": ss.flags("-v", "-kvu", np="2"), "after": {"B": 3, "C": 3},
     "A": body("The river flows to the sea. " * 75 + "And then", 24, stream=True),
     "B": body("Snow is white and " * 30, 16),
     "C": body("Numbers: 1, 2, 3,", 10)},
    {"name": "three_slots_kvu_np3", "flags": ss.flags("-v", "-kvu", "-b", "64", "-ub", "16", np="3"),
     "after": {"B": 3, "C": 10},
     "A": body("Tell me about the stars in the night sky", 36, stream=True, ignore_eos=True),
     "B": body("Green is the colour of " * 8, 20, temperature=0.8, seed=5),
     "C": body("The train leaves the station " * 12, 14)},
]

# the schedules played on the qwen3 file (batching_qwen3.json): both sides of 512 cells, a small batch, three slots
OUT_QWEN3 = REPO / "tests" / "oracle" / "server" / "batching_qwen3.json"
QWEN3_SCHEDULES = ("greedy_np2", "sampled_np2", "split_kv_np2", "three_slots_np3")


# Gemma 3 (sliding-window layers, a window of 512): the schedules of batching_gemma3.json
OUT_GEMMA3 = REPO / "tests" / "oracle" / "server" / "batching_gemma3.json"
G3_DELIMS = [{"role": "user", "delimiter": "<start_of_turn>user\n"},
             {"role": "assistant", "delimiter": "<start_of_turn>model\n"}]


def g3_turns(questions, answers=()) -> str:
    """A Gemma chat as text: the user turns with the model's answers between them, ending at the model's turn."""
    out = ""
    for i, q in enumerate(questions):
        out += f"<start_of_turn>user\n{q}<end_of_turn>\n<start_of_turn>model\n"
        if i < len(answers):
            out += answers[i] + "<end_of_turn>\n"
    return out


def g3_body(questions, n, answers=(), **kw) -> dict:
    return body(g3_turns(questions, answers), n, message_delimiters=G3_DELIMS, **kw)


G3_Q = ["What is the capital of France?", "And of Italy?"]
G3_DOC_Q = ["Read this text.\n" + ss.DOC + "\nWhere does the Rhine begin?", "Where does it end?"]

GEMMA3_SCHEDULES = [
    # B0 is a short conversation's first turn; B its second, on B0's slot: the pos_min rule finds the cache's
    # sliding-window part useless past the common prefix and restores B0's checkpoint (as with -np 1) while A
    # streams beside it; A's prompt (about 1,100 tokens) passes the sliding-window cache (1024 cells); C waits
    {"name": "g3_chat_np2", "after": {"B": 3, "C": 3},
     "pre": {"B0": g3_body(G3_Q[:1], 10)},
     "A": g3_body(["Read this text.\n" + ss.DOC * 2 + "\nSummarize it."], 24, stream=True),
     "B": lambda ans: g3_body(G3_Q, 10, [ans["B0"]["content"]]),
     "C": g3_body(["Write a short haiku about the rain."], 12)},
    # -b 64 -ub 16: B0's first turn carries a text of about 560 tokens (past the window); B, its second turn,
    # shares each step's 64 tokens with A's row: its share ends at the user message and 20 and 4 tokens before
    # its end (checkpoints made before each step's decode); C is deferred
    {"name": "g3_small_batch_np2", "flags": ss.flags("-v", "-b", "64", "-ub", "16", np="2"),
     "after": {"B": 3, "C": 3},
     "pre": {"B0": g3_body(G3_DOC_Q[:1], 8)},
     "A": g3_body(["Tell me about the stars in the night sky."], 30, stream=True),
     "B": lambda ans: g3_body(G3_DOC_Q, 10, [ans["B0"]["content"]]),
     "C": g3_body(["Name three colours."], 8)},
    # two long prompts side by side: B's (about 600 tokens) joins while A (about 1,100) generates, sampled
    {"name": "g3_overlap_np2", "after": {"B": 4, "C": 4},
     "A": body("The Rhine. " + ss.DOC * 2 + "\nIn short, the Rhine", 40, stream=True),
     "B": g3_body(G3_DOC_Q[:1], 14, temperature=0.8, seed=3),
     "C": body("A list of rivers in Europe:\n1.", 10)},
]
# the first two on one unified KV stream (-kvu): the slots' cells interleave in the shared base and sliding-window
# caches; B0's conversation is saved to the host prompt cache and cleared when A starts (cache_idle_slots), then
# restored for B (both caches' cells and its checkpoints), and B's checkpoints are its sequence's cells of the
# shared sliding-window cache
GEMMA3_SCHEDULES += [dict(s, name=s["name"].replace("_np2", "_kvu_np2"),
                          flags=[f for f in s.get("flags", FLAGS) if f != "-v"] + ["-kvu", "-v"]) for s in GEMMA3_SCHEDULES[:2]]


def _argv(flags):
    return flags[2:]


def _stream_post(srv, req, on_chunk):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
    conn.request("POST", P, body=json.dumps(req).encode(), headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    events = []
    buf = b""
    while True:
        line = r.readline()
        if not line:
            break
        if line.startswith(b"data: "):
            ev = json.loads(line[6:])
            events.append(ev)
            on_chunk(len(events))
    conn.close()
    return events


def _stream_answer(events):
    """The stream folded into what the test compares: every token id, its text and probabilities, the end."""
    toks = []
    for ev in events:
        toks.extend(ev.get("tokens") or [])
    probs = [p for ev in events for p in ev.get("completion_probabilities") or []]
    last = events[-1]
    return {"content": "".join(ev.get("content", "") for ev in events), "tokens": toks,
            "completion_probabilities": probs, "stop_type": last.get("stop_type"), "tokens_predicted":
            last.get("tokens_predicted"), "tokens_evaluated": last.get("tokens_evaluated")}


def _plain_answer(ans):
    return {"content": ans["content"], "tokens": ans["tokens"], "completion_probabilities":
            ans["completion_probabilities"], "stop_type": ans["stop_type"], "tokens_predicted":
            ans["tokens_predicted"], "tokens_evaluated": ans["tokens_evaluated"]}


def run_schedule(s: dict, model: str) -> dict:
    log = f"/tmp/record_batching_{s['name']}.log"
    answers = {}
    requests = {}
    with LlamaServer(model, base_args=_argv(s.get("flags", FLAGS)), log=log) as srv:
        for name, req in s.get("pre", {}).items():     # one after the other, before A
            st, _, payload = srv.post(P, req)
            assert st == 200, payload
            answers[name] = _plain_answer(json.loads(payload))
            requests[name] = req
        for name in "ABC":                              # a later turn is built from the answers so far
            requests[name] = s[name](answers) if callable(s[name]) else s[name]
        s = dict(s, **requests)
        fired = set()
        threads = []

        def post(name):
            st, _, payload = srv.post(P, s[name])
            assert st == 200, payload
            answers[name] = _plain_answer(json.loads(payload))

        def on_chunk(n):
            for name in ("B", "C"):
                if s["after"][name] == n and name not in fired:
                    fired.add(name)
                    t = threading.Thread(target=post, args=(name,))
                    t.start()
                    threads.append(t)
                    time.sleep(0.05)           # B is posted (and launched) before C, mostly: the log says

        answers["A"] = _stream_answer(_stream_post(srv, s["A"], on_chunk))
        for t in threads:
            t.join()
    joins = schedule_of(log, s)
    by_len = {answers[k]["tokens_evaluated"]: k for k in answers}
    assert len(by_len) == len(answers), "the prompts need distinct token counts (the log names them by it)"
    for j in joins:
        j["request"] = by_len[j.pop("n_tokens")]
    pre = joins[:len(s.get("pre", {}))]
    joins = joins[len(pre):]
    assert [j["request"] for j in pre] == list(s.get("pre", {})), pre
    assert [j["request"] for j in joins][0] == "A" and len(joins) == 3, joins
    return {"answers": answers, "schedule": joins, "requests": requests}


def schedule_of(log: str, s: dict) -> list[dict]:
    """From llama-server's -v log, each prompt's start in order: its slot and task id, and how many tokens each
    other live task had sampled then (its last `process_token ... n_gen` line)."""
    n_gen = {}                          # task -> tokens sampled so far
    live = set()
    joins = []
    was_deferred = set()
    for ln in Path(log).read_text(errors="replace").splitlines():
        d = re.search(r"defer task, id_task = (\d+)", ln)
        if d:
            was_deferred.add(int(d.group(1)))
        m = re.search(r"slot +\S+: id +(\d+) \| task (-?\d+) \| (.*)", ln)
        if not m:
            continue
        sid, tid, msg = int(m.group(1)), int(m.group(2)), m.group(3)
        g = re.search(r"n_gen = (\d+),", msg)
        if msg.startswith("n_gen = ") and g:
            n_gen[tid] = int(g.group(1))
        if msg.startswith("new prompt"):
            deferred = tid in was_deferred
            n = int(re.search(r"task.n_tokens = (\d+)", msg).group(1))
            joins.append({"slot": sid, "task": tid, "n_tokens": n, "deferred": deferred,
                          "others_n_gen": {str(t): n_gen.get(t, 0) for t in sorted(live)}})
            live.add(tid)
        if msg.startswith("stop processing"):
            live.discard(tid)
    return joins


def alone(s: dict, model: str, requests: dict) -> dict:
    out = {}
    flags = [f for f in s.get("flags", FLAGS) if f != "-v"]
    with LlamaServer(model, base_args=_argv(flags)) as srv:
        for name, req in requests.items():
            req = dict(req, stream=False)
            st, _, payload = srv.post(P, dict(req, cache_prompt=False))
            assert st == 200, payload
            out[name] = _plain_answer(json.loads(payload))
    return out


def main() -> None:
    check = "--check" in sys.argv
    out = OUT
    model = str(model_path("smollm2"))
    only = [a for a in sys.argv[1:] if not a.startswith("-")]
    rec = {"doc": __doc__.split("\n\n")[0], "path": P, "schedules": []}
    schedules = SCHEDULES
    if "--qwen3" in sys.argv:
        from bankml.models.verify import sha256_file
        from testing.record_forward import derived
        out, model = OUT_QWEN3, str(derived("qwen3"))
        rec |= {"model": "qwen3", "sha256": sha256_file(model)}
        schedules = [s for s in SCHEDULES if s["name"] in QWEN3_SCHEDULES]
    if "--gemma3" in sys.argv:
        out, model, schedules = OUT_GEMMA3, str(model_path("gemma3")), GEMMA3_SCHEDULES
        rec["model"] = "gemma3"
    for s in schedules:
        if only and s["name"] not in only:
            continue
        got = run_schedule(s, model)
        entry = {"name": s["name"], "flags": s.get("flags", FLAGS), "after": s["after"],
                 "pre": list(s.get("pre", {})), **got}
        if out != OUT_GEMMA3:   # Gemma 3's answers alone are gemma3.json's (and differ from batched ones here)
            entry["alone"] = alone(s, model, got["requests"])
        rec["schedules"].append(entry)
        print(s["name"], json.dumps(got["schedule"])[:400])
    if check:
        return
    if only and out.exists():               # the other schedules stay as recorded
        new = {e["name"]: e for e in rec["schedules"]}
        old = json.loads(out.read_text())["schedules"]
        names = [e["name"] for e in old] + [n for n in new if n not in {e["name"] for e in old}]
        rec["schedules"] = [new.get(n) or next(e for e in old if e["name"] == n) for n in names]
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(out)
    print("wrote", out)


if __name__ == "__main__":
    main()
