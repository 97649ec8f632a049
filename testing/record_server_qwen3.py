"""Records llama-server b11192 serving the qwen3 files (SmolLM2-135M-Instruct Q4_1 re-described as qwen3 by
bankml.models.redescribe, and its Q1_0 / Q2_0 quantizations by `bankml quantize`: testing/record_forward.py
derived()) into tests/oracle/server/qwen3.json, for tests/test_server_qwen3.py. Developer tool: needs the oracle
build.

    PYTHONPATH=. python testing/record_server_qwen3.py [--no-check] [--port-base 8461] [--only NAME ...]

Each session names its file (`model`: qwen3, qwen3_q1_0 or qwen3_q2_0; the record keeps the file's sha256) and
runs on a fresh llama-server with the standard flags (-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui;
`$MODEL` is that file) plus its own; its requests go in order (a conversation's later turns are built from the
answers before them, so they reuse the earlier turns through the slot's prompt cache). Unless --no-check, each
session is played twice and one whose two runs differ is left out (as testing/record_server.py does).

What the sessions cross, on each of the Q1_0 and Q2_0 files (and a few on the re-described one): multi-turn
chats (the prompt cache), streams, logprobs with top_logprobs, seeded sampling, JSON mode (response_format
json_object), an edited history, two interleaved conversations (the RAM prompt cache), /completion; and
--context-shift at -c 256 with an F16 and a Q8_0 cache (the K re-rotation in qwen3's NEOX RoPE, the generations
shifting several times).

Recorded so far (2026-12-06, `--only` runs): 18 of the sessions below; shift_q8_0, q1_shift_q8_0, q1_two_conversations,
q1_completion, q2_two_short_conversations and plain_info are defined but not in the record yet (llama-server ran
the Bonsai files below 1 token/s on the loaded machine; one shift_q8_0 run hit the 300 s request timeout).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing import record_server as rs  # noqa: E402
from testing.record_context_shift import LIST, STORY, cmpl  # noqa: E402
from testing.record_context_shift import chat as chat0  # noqa: E402
from testing.server_sessions import (DOC, Q, assistant, chat, completion, flags, get, reply,  # noqa: E402
                                     turns, user)

OUT = REPO / "tests" / "oracle" / "server" / "qwen3.json"
#: the files (testing/record_forward.py derived() keys) and the prefixes of their sessions' names
MODELS = {"qwen3": "plain", "qwen3_q1_0": "q1", "qwen3_q2_0": "q2"}
POEM = "Write a short poem about the sea."


def _conv(questions, sys_text=None, at=0, **kw):
    return turns(questions, sys_text=sys_text, at=at, max_tokens=kw.pop("max_tokens", 10), **kw)


def _chat_sessions(tag: str, quick: bool = False) -> list[tuple]:
    """(name, steps, flags, note) of the chat sessions played on one quantized file: 27 chats and 2 completions,
    or (quick: for Q2_0, whose b11192 CPU kernels run about 3x slower than Q1_0's) 24 chats with short prompts
    only."""
    a = _conv(["Where does the Rhine begin?", "And where does it end?"], sys_text="Answer from this text.\n" + DOC)
    b = _conv(["Write a haiku about rain.", "Now one about snow."])
    c = _conv(["Name a fruit.", "And a vegetable?"])

    def edited(prev):
        return chat([user("What is the capital of Spain?"), assistant(reply(prev[0])), user(Q[1])], max_tokens=10)
    long_ones = {f"{tag}_long_doc", f"{tag}_two_conversations", f"{tag}_completion"}
    out = [
        (f"{tag}_multi_turn", _conv(Q), None, "four short turns: each reuses the last through the prompt cache"),
        (f"{tag}_multi_turn_stream", _conv(Q[:3], stream=True), None, "the same as streams"),
        (f"{tag}_long_doc", _conv(["Where does the Rhine begin?", "How long is it?", "Which sea does it reach?"],
                                  sys_text="Answer from this text.\n" + DOC), None,
         "a system text of about 560 tokens (past n_ubatch 512), three turns"),
        (f"{tag}_logprobs", _conv([Q[0], Q[1]], logprobs=True, top_logprobs=3) +
         [lambda prev: chat([user(Q[0])], logprobs=True, top_logprobs=3, max_tokens=10, stream=True)], None,
         "logprobs with top_logprobs 3, two turns then a stream"),
        (f"{tag}_seeded", [chat([user(POEM)], temperature=0.9, seed=1, max_tokens=10),
                           chat([user(POEM)], temperature=0.9, seed=2, max_tokens=10),
                           chat([user(POEM)], temperature=1.1, seed=1, top_k=20, top_p=0.9, max_tokens=10),
                           chat([user(POEM)], temperature=0.7, seed=5, stream=True, max_tokens=10)], None,
         "seeded sampling; the same prompt again (fully cached: the last token recomputed)"),
        (f"{tag}_json", [chat([user("Give a JSON object with the keys name and age of a cat.")],
                              response_format={"type": "json_object"}, max_tokens=12),
                         chat([user("Describe Paris as JSON.")], response_format={"type": "json_object"},
                              max_tokens=12, stream=True)], None, "JSON mode (a grammar)"),
        (f"{tag}_edited_history", _conv(Q[:2]) + [
            edited, lambda prev: chat([user(Q[0]), assistant("Paris."), user(Q[1])], max_tokens=10)], None,
         "the first question edited, then the first answer: shorter common prefixes"),
        (f"{tag}_two_conversations", [a[0], b[0], lambda prev: a[1]([prev[0]]), lambda prev: b[1]([prev[1]])],
         None, "conversations A and B interleaved: the RAM prompt cache brings A back"),
        (f"{tag}_completion", [completion("The Rhine is a river that", n_predict=10),
                               completion(DOC + "\nIn short, the Rhine", n_predict=10)], None,
         "/completion, a short and a long prompt"),
    ]
    if not quick:
        return out
    return [x for x in out if x[0] not in long_ones] + [
        (f"{tag}_two_short_conversations", [c[0], b[0], lambda prev: c[1]([prev[0]]), lambda prev: b[1]([prev[1]])],
         None, "two short conversations interleaved: the RAM prompt cache brings the first back")]


def _shift_steps(long: bool) -> list[dict]:
    """Generations that shift at -c 256 (when the slot's tokens + 1 reach n_ctx), with their probabilities: n_keep
    0 (the default) and -1, a follow-up on the shifted slot (the prompt cache); long: a seeded streamed chat with
    n_keep 10 and n_discard 40 too."""
    s = [cmpl(STORY, 330, n_probs=2),
         cmpl(LIST, 300, n_keep=-1, n_probs=1),
         cmpl(LIST, 30, n_keep=-1, n_probs=1)]
    if long:
        s.append(chat0("Tell me a very long story about a dragon and a knight.", 280, logprobs=True, top_logprobs=2,
                       temperature=0.9, seed=7, n_keep=10, n_discard=40, stream=True))
    return s


def sessions() -> list[dict]:
    s = []

    def add(model, name, steps, f=None, note=""):
        s.append({"name": name, "model": model, "flags": f or flags(), "note": note, "steps": steps})

    # the order they are recorded in: the re-described file's (the NEOX shift among them), then the Bonsai files'
    add("qwen3", "plain_multi_turn", _conv(Q), note="the re-described file: four turns")
    add("qwen3", "plain_mixed", [chat([user(POEM)], temperature=0.9, seed=3, max_tokens=10),
                                 chat([user("Give a JSON object with the keys name and age of a cat.")],
                                      response_format={"type": "json_object"}, max_tokens=12),
                                 chat([user(Q[0])], logprobs=True, top_logprobs=2, max_tokens=10, stream=True)],
        note="the re-described file: seeded, JSON mode, a logprobs stream")
    shift = ("--context-shift",)
    q8 = ("-ctk", "q8_0", "-ctv", "q8_0")
    add("qwen3", "shift_f16", _shift_steps(True), flags(*shift, ctx="256"),
        note="--context-shift at -c 256, F16 cache: K re-rotated with NEOX RoPE")
    add("qwen3", "shift_q8_0", _shift_steps(False), flags(*shift, *q8, ctx="256"),
        note="--context-shift at -c 256, Q8_0 cache (dequantize, NEOX RoPE, quantize)")
    for model, tag in MODELS.items():
        add(model, f"{tag}_info",
            [get("/props"), get("/v1/models"), chat([user(Q[0])], max_tokens=4), get("/props")],
            note="what the server says of the file: /props, /v1/models (model_ftype, n_params, size)")
    for model in ("qwen3_q1_0", "qwen3_q2_0"):
        tag = MODELS[model]
        for name, steps, f, note in _chat_sessions(tag, quick=model == "qwen3_q2_0"):
            add(model, name, steps, f, note)
    add("qwen3_q1_0", "q1_shift_q8_0", _shift_steps(False), flags(*shift, *q8, ctx="256"),
        note="the Q1_0 file shifting, Q8_0 cache")
    return s


def main() -> None:
    from bankml.models.verify import sha256_file
    from testing.record_forward import derived
    paths = {m: derived(m) for m in MODELS}
    digests = {m: sha256_file(p) for m, p in paths.items()}
    rs.record_some(OUT, sessions(), __doc__, 8461, lambda sess: paths[sess["model"]],
                   lambda sess: {"model": sess["model"], "sha256": digests[sess["model"]]})

if __name__ == "__main__":
    main()
