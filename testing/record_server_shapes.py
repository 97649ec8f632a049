"""Records llama-server b11192 serving bankml.models.synth's files (shapes SmolLM2 does not have, with SmolLM2's
vocabulary and template: docs/synth.md) into tests/oracle/server/shapes.json, for tests/test_server_shapes.py.
Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_server_shapes.py [--no-check] [--port-base 8481] [--only NAME ...]

Each session names its file (`shape` and `type`; the record keeps the file's sha256) and runs on a fresh
llama-server with the standard flags (-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui; `$MODEL` is that
file); its requests go in order (later turns built from earlier answers, so the slot's prompt cache is crossed).
Unless --no-check, each session is played twice and one whose two runs differ is left out.

The 1B llama (n_embd 2048, 24 layers, head size 128, GQA 4, untied output; Q4_1) answers multi-turn chats,
streams, logprobs, seeded sampling, JSON mode and /completion; the head-size-256 GQA-1 llama and the qwen3 shape
answer a few chats each. The answers are not sensible text (synthetic weights); the tokens and floats are the
judge.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing import record_server as rs  # noqa: E402
from testing.server_sessions import Q, chat, completion, flags, get, turns, user  # noqa: E402

OUT = REPO / "tests" / "oracle" / "server" / "shapes.json"
POEM = "Write a short poem about the sea."
BIG = ("llama-1b", "Q4_1")


def _conv(questions, **kw):
    return turns(questions, max_tokens=kw.pop("max_tokens", 8), **kw)


def sessions() -> list[dict]:
    s = []

    def add(shape, name, steps, note=""):
        s.append({"name": name, "shape": shape[0], "type": shape[1], "flags": flags(), "note": note,
                  "steps": steps})

    add(BIG, "b1_info", [get("/props"), get("/v1/models"), chat([user(Q[0])], max_tokens=4)],
        note="what the server says of the file")
    add(BIG, "b1_multi_turn", _conv(Q[:3]), note="three turns, each reusing the last through the prompt cache")
    add(BIG, "b1_stream_logprobs", _conv(Q[:2], stream=True, logprobs=True, top_logprobs=2),
        note="two streamed turns with logprobs")
    add(BIG, "b1_seeded", [chat([user(POEM)], temperature=0.9, seed=1, max_tokens=8),
                           chat([user(POEM)], temperature=1.1, seed=2, top_k=20, top_p=0.9, max_tokens=8)],
        note="seeded sampling; the second fully cached but its last token")
    add(BIG, "b1_json", [chat([user("Give a JSON object with the keys name and age of a cat.")],
                              response_format={"type": "json_object"}, max_tokens=10)], note="JSON mode")
    add(BIG, "b1_completion", [completion("The Rhine is a river that", n_predict=8, n_probs=2)],
        note="/completion with probabilities")
    for shape in (("llama-h256-gqa1", "Q8_0"), ("qwen3-h128-gqa4", "Q8_0"), ("llama-h64-gqa8-untied", "Q4_1")):
        add(shape, f"{shape[0]}_chats", _conv(Q[:2]) + [chat([user(POEM)], temperature=0.8, seed=3, max_tokens=8,
                                                             stream=True)],
            note="two turns and a seeded stream")
    return s


def main() -> None:
    from bankml.models.verify import sha256_file
    from testing.record_forward import synth
    paths, digests = {}, {}
    for sess in sessions():
        key = (sess["shape"], sess["type"])
        if key not in paths:
            paths[key] = synth(*key)
            digests[key] = sha256_file(paths[key])
    rs.record_some(OUT, sessions(), __doc__, 8481, lambda sess: paths[(sess["shape"], sess["type"])],
                   lambda sess: {"shape": sess["shape"], "type": sess["type"],
                                 "sha256": digests[(sess["shape"], sess["type"])]})


if __name__ == "__main__":
    main()
