"""Record llama-server b11192 serving sequential requests on a unified KV cache (`-np` auto, the default, and
`-np 2 -kvu`) for tests/test_server_unified.py: tests/oracle/server/unified.json.

    PYTHONPATH=. python testing/record_server_unified.py [--no-check] [--port-base 8251]

With a unified cache every slot's sequence lives in one stream of n_ctx cells: a request lands in the cells its
slot's sequence gets from the search head (after other slots' cells, in the holes an earlier seq_rm left), so
its attention runs over another layout than a fresh cache's. The sessions make that happen with requests that
go one after the other on different slots (by LRU, by similarity, by id_slot):
- the RAM prompt cache (`--cache-ram`, on by default) restores a conversation into a slot while another slot
  still holds its cells (the restore's cells go after them), and `--cache-idle-slots` (on by default) then saves
  and clears the other idle slots, leaving holes that the new tokens fill first: the sequence's cells are not
  in position order;
- with `--no-cache-idle-slots`, or `-cram 0` (which turns idle caching off), idle slots keep their cells and a
  second conversation goes after the first's;
- `-c 512 -cram 0`: a prompt that does not fit beside the idle slots' cells fails its llama_decode, and
  llama-server purges the first idle slot holding tokens and retries (try_clear_idle_slots); its generation
  then runs out of cells and purges the next idle slot (llama-server's log says "purging slot" twice).
Every completion asks n_probs (float bits compared) and return_tokens; prompts are raw /completion text (no
common prefix between conversations, so slot choice goes by LRU unless a request names id_slot) and chats.
Each session is played twice on fresh servers (unless --no-check) and left out if the two runs differ.

    PYTHONPATH=. python testing/record_server_unified.py --qwen3 [--no-check] [--port-base 8271]

plays the same sessions (names prefixed qwen3_) on the Q4_1 file re-described as qwen3 (testing/record_forward.py
derived("qwen3"); the record keeps its sha256) into tests/oracle/server/unified_qwen3.json, replayed by the same
test on that file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing import record_server  # noqa: E402
from testing import server_sessions as ss  # noqa: E402

AUTO = ["-m", "$MODEL", "-t", "2", "-c", "4096", "--jinja", "--reasoning", "off", "--no-webui"]

A = ("The history of the river valley is a long one. Farmers came first, planting wheat and barley along the "
     "banks, and the villages grew into towns as trade moved up and down the water. ") * 5
B = ("In the workshop the clockmaker kept a hundred small drawers, each holding springs, gears, pins and tiny "
     "screws, labelled in a careful hand that nobody else could read. ") * 4
C = ("Seven ships left the harbour at dawn, their sails grey against the cloudy sky, bound for islands that "
     "appeared on no chart the harbour master had ever seen. ") * 3
E = ("Under the old bridge the fishermen mended their nets every morning, talking about the weather, the price "
     "of salt and the boats that had not come back. ") * 3
D = "A recipe for bread: flour, water, salt and yeast, mixed and kneaded, then left to rise for"


def comp(prompt, n=24, **kw) -> dict:
    return ss.post("/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "n_probs": 2,
                                   "return_tokens": True, **kw})


def session(name, flags, spec, note, tail=()):
    """Steps whose continuation prompts are built from what was sent and answered before."""
    steps = []
    for i, s in enumerate(spec):
        if s[0] == "new":
            steps.append(comp(s[1], **s[2]))
        else:
            _, j, extra, kw = s

            def f(prev, j=j, extra=extra, kw=kw):
                return comp(prev[j]["_prompt"] + prev[j]["json"]["content"] + extra, **kw)
            steps.append(f)
    return {"name": name, "flags": flags, "note": note, "steps": steps + list(tail)}


def play(sess, model, port):
    """record_server.play, with each answer remembering its request's prompt (for the continuations)."""
    steps = []
    answers = []
    log = f"/tmp/record_server_unified_{sess['name']}.log"
    import server_replay as sr
    with sr.Fixtures(sess) as fx, record_server.start(sess["flags"], model, port, log) as srv:
        for step in sess["steps"]:
            req = step(answers) if callable(step) else step
            ans = sr.substitute_model(sr.exchange(srv.port, req, fx), model)
            steps.append({"request": req, "answer": ans})
            answers.append(dict(ans, _prompt=(req.get("body") or {}).get("prompt")))
    return steps


SPEC_RESTORE = [
    ("new", A, {}),                                   # LRU: slot 3, cells 0 ..
    ("new", B, {}),                                   # LRU: slot 2; A saved and cleared (idle)
    ("more", 0, " Later, the railway came and", {}),  # LRU: slot 1, A restored after B's cells; B cleared
    ("more", 1, " One winter evening a stranger", {}),  # LRU: slot 0, B restored beside A's interleaved cells
    ("new", C, {"id_slot": 3}),                       # requested slot 3
    ("more", 2, " The old station", {"n_predict": 40}),
    ("new", D, {}),
]


def sessions() -> list[dict]:
    s = []
    s.append(session("auto_restore", AUTO, SPEC_RESTORE,
                     "-np auto: conversations restored from the RAM prompt cache beside other slots' cells, idle "
                     "slots cleared", [ss.get("/slots")]))
    s.append(session("auto_no_idle_clear", AUTO + ["--no-cache-idle-slots"], SPEC_RESTORE,
                     "-np auto --no-cache-idle-slots: idle slots keep their cells, later conversations go after them",
                     [ss.get("/slots")]))
    s.append(session("auto_cram0", AUTO + ["-cram", "0"], SPEC_RESTORE,
                     "-np auto -cram 0: no RAM prompt cache (idle caching off): every slot keeps its cells"))
    s.append(session("np2_kvu", AUTO[:6] + ["-np", "2", "-kvu"] + AUTO[6:], SPEC_RESTORE,
                     "-np 2 -kvu: two slots on one unified stream"))
    s.append(session("auto_small_ctx_purge", ["-m", "$MODEL", "-t", "2", "-c", "512", "--jinja", "--reasoning",
                                              "off", "--no-webui", "-cram", "0"],
                     [("new", A, {"n_predict": 16}), ("new", B, {"n_predict": 16}),
                      ("more", 0, " Later", {"n_predict": 8}), ("new", C, {"n_predict": 8, "id_slot": 0}),
                      ("new", E, {"n_predict": 64})],
                     "-c 512 -cram 0: a prompt that does not fit beside the idle slots' cells purges the first "
                     "idle slot holding tokens (try_clear_idle_slots) and is retried; its generation runs out of "
                     "cells again and purges the next one, whose hole takes its last tokens"))
    chats = ss.turns(["Name three rivers of Europe.", "Which one is the longest?"], logprobs=True, top_logprobs=2)
    other = ss.turns(["Write a haiku about snow."], logprobs=True, top_logprobs=2, at=2)
    s.append({"name": "auto_chats", "flags": AUTO + ["--no-cache-idle-slots"],
              "note": "-np auto: two chats on different slots with logprobs, the second after the first's cells",
              "steps": [chats[0], other[0], chats[1],
                        ss.chat([ss.user("Write a haiku about snow.")], logprobs=True, top_logprobs=2, id_slot=1)]})
    return s


def qwen3_sessions() -> list[dict]:
    """sessions() on the qwen3 file: names prefixed qwen3_, the file named ("model": record_forward.py's key)."""
    return [dict(s, name="qwen3_" + s["name"], model="qwen3") for s in sessions()]


def record_qwen3(check: bool, port_base: int) -> None:
    """Each of qwen3_sessions() played on the qwen3 file (twice when `check`, an unstable one left out), written to
    unified_qwen3.json with the file's key and sha256."""
    from bankml.models.verify import sha256_file
    from testing.record_forward import derived
    path = derived("qwen3")
    digest = sha256_file(path)
    ports = record_server.Ports(port_base)
    out = []
    for sess in qwen3_sessions():
        steps = play(sess, str(path), ports.next())
        problems = record_server.unstable(steps, play(sess, str(path), ports.next())) if check else []
        if problems:
            print(f"UNSTABLE {sess['name']}: left out\n  " + "\n  ".join(p[:300] for p in problems[:5]))
            continue
        print(f"{sess['name']}: {len(steps)} requests, statuses {[x['answer']['status'] for x in steps]}", flush=True)
        out.append({"name": sess["name"], "model": sess["model"], "sha256": digest, "flags": sess["flags"],
                    "note": sess["note"], "steps": steps})
    (record_server.OUT / "unified_qwen3.json").write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    if "--qwen3" in sys.argv:
        rest = sys.argv[1:]
        rest.remove("--qwen3")
        port = int(rest[rest.index("--port-base") + 1]) if "--port-base" in rest else 8271
        record_qwen3("--no-check" not in rest, port)
    else:
        record_server.record_file("unified.json", sessions(), __doc__, 8251, play_session=play)
