"""Records llama-server b11192 serving Gemma 3 270M Q4_K_M (a model with sliding-window layers) into
tests/oracle/server/gemma3.json, for tests/test_server_gemma3.py. Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_server_gemma3.py [--no-check] [--port-base 8271] [--only NAME ...]

Each session runs on a fresh llama-server with the standard flags (-t 2 -c 4096 -np 1 --jinja --reasoning off
--no-webui; `$MODEL` is the gemma3 file) plus its own, and its requests go in order (a conversation's later
turns are built from the answers before them, so they reuse turn 1 through the slot's prompt cache and its
context checkpoints). Unless --no-check, each session is played twice and one whose two runs differ is left out
(as testing/record_server.py does).

What the sessions cross: multi-turn chats (the pos_min rule restoring a checkpoint), prompts longer than the
sliding window (512) and n_ubatch (512), and longer than the sliding-window cache (1024 cells at -c 4096, so
cells are reused and pos_min > 0), streams, logprobs with top_logprobs 3, seeded sampling, JSON mode, an edited
history (a shorter common prefix), cache_prompt false, /completion without message spans, small
--checkpoint-min-step and --ctx-checkpoints (cuts at user messages, eviction), and --swa-full.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing import record_server as rs  # noqa: E402
from testing.oracle import model_path  # noqa: E402
from testing.server_sessions import (DOC, Q, assistant, chat, completion, flags, reply, system,  # noqa: E402
                                     turns, user)

OUT = REPO / "tests" / "oracle" / "server" / "gemma3.json"

LONG_DOC = DOC * 2           # about 1,100 tokens: past the window (512), n_ubatch (512) and the SWA cache (1024)


def _conv(questions, sys_text=None, at=0, **kw):
    return turns(questions, sys_text=sys_text, at=at, max_tokens=kw.pop("max_tokens", 10), **kw)


def sessions() -> list[dict]:
    s = []

    def add(name, steps, f=None, note=""):
        s.append({"name": name, "flags": f or flags(), "note": note, "steps": steps})

    add("g3_multi_turn", _conv(Q), note="four short turns: each reuses the last through a checkpoint")
    add("g3_multi_turn_stream", _conv(Q[:3], stream=True), note="the same as streams")
    add("g3_long_doc", _conv(["Where does the Rhine begin?", "Where does it end?", "How long is it?"],
                             sys_text="Answer from this text.\n" + DOC),
        note="a system text of about 560 tokens: past the window and n_ubatch")
    add("g3_very_long", _conv(["Summarize the text in one sentence.", "Which sea does the river reach?"],
                              sys_text="Answer from this text.\n" + LONG_DOC),
        note="about 1,100 tokens: the sliding-window cache (1024 cells) reuses cells, pos_min > 0")
    add("g3_logprobs", _conv([Q[0], Q[1]], logprobs=True, top_logprobs=3, max_tokens=10) +
        [lambda prev: chat([user(Q[0])], logprobs=True, top_logprobs=3, max_tokens=10, stream=True)],
        note="logprobs with top_logprobs 3, two turns then a stream")
    add("g3_seeded", [chat([user("Write a short poem about the sea.")], temperature=0.9, seed=1, max_tokens=10),
                      chat([user("Write a short poem about the sea.")], temperature=0.9, seed=2, max_tokens=10),
                      chat([user("Write a short poem about the sea.")], temperature=1.1, seed=1, top_k=20,
                           top_p=0.9, max_tokens=10),
                      chat([user("Write a short poem about the sea.")], temperature=0.7, seed=5, stream=True,
                           max_tokens=10)],
        note="seeded sampling; the same prompt again (fully cached: the last token recomputed)")
    add("g3_json", [chat([user("Give a JSON object with the keys name and age of a cat.")],
                         response_format={"type": "json_object"}, max_tokens=10),
                    chat([user("Describe Paris as JSON.")], response_format={"type": "json_object"}, max_tokens=10,
                         stream=True)],
        note="JSON mode (a grammar)")

    def edited(prev):
        return chat([user("What is the capital of Spain?"), assistant(reply(prev[0])), user(Q[1])], max_tokens=10)
    add("g3_edited_history", _conv(Q[:2], max_tokens=10) + [
        edited, lambda prev: chat([user(Q[0]), assistant("Paris."), user(Q[1])], max_tokens=10)],
        note="the first question edited, then the first answer: shorter common prefixes")
    add("g3_long_then_edit", _conv(["What is this text about?", "Name one country it mentions."],
                                   sys_text="Answer from this text.\n" + LONG_DOC, max_tokens=10) +
        [lambda prev: chat([system("Answer from this text.\n" + LONG_DOC), user("Name one city.")], max_tokens=10),
         lambda prev: chat([system("Answer briefly.\n" + LONG_DOC), user("Name one city.")], max_tokens=10)],
        note="long prompts whose common prefix ends past and before the window's reach")
    add("g3_no_cache_prompt", [chat([user(Q[0])], cache_prompt=False, max_tokens=10),
                               chat([user(Q[0]), assistant("Paris."), user(Q[1])], cache_prompt=False,
                                    max_tokens=10),
                               chat([user(Q[0]), assistant("Paris."), user(Q[1])], max_tokens=10)],
        note="cache_prompt false: every prompt from 0 (checkpoints erased)")
    add("g3_completion", [completion("The Rhine is a river that", n_predict=10),
                          completion(DOC + "\nIn short, the Rhine", n_predict=10),
                          completion(DOC + "\nIn short, the Rhine flows", n_predict=10)],
        note="/completion: no message spans, only the cuts near the prompt's end")
    add("g3_min_step", _conv(["Tell me about the Alps.", "And about rivers there?", "Which is longest?",
                              "Thanks, one word: your favourite?"], sys_text="Answer from this text.\n" + DOC,
                             max_tokens=10),
        f=flags("--checkpoint-min-step", "64", "--ctx-checkpoints", "3"),
        note="-cms 64 -ctxcp 3: batches cut at user messages, checkpoints evicted")
    add("g3_swa_full", _conv(["Where does the Rhine begin?", "How long is it?", "Which sea does it reach?"],
                             sys_text="Answer from this text.\n" + LONG_DOC, max_tokens=10),
        f=flags("--swa-full"), note="--swa-full: a full-size sliding-window cache, no checkpoints")
    a = _conv(["Where does the Rhine begin?", "And where does it end?"], sys_text="Answer from this text.\n" + DOC)
    b = _conv(["Write a haiku about rain.", "Now one about snow."])
    add("g3_two_conversations", [a[0], b[0], lambda prev: a[1]([prev[0]]), lambda prev: b[1]([prev[1]])],
        note="conversations A and B interleaved: the RAM prompt cache brings A back with its checkpoints")
    add("g3_progress", [chat([system("Answer from this text.\n" + LONG_DOC), user("Name a country.")], stream=True,
                             return_progress=True, max_tokens=10),
                        lambda prev: chat([system("Answer from this text.\n" + LONG_DOC), user("Name a country."),
                                           assistant(reply(prev[0])), user("Another one?")], stream=True,
                                          return_progress=True, max_tokens=10)],
        note="return_progress streams: prompt_progress shows every llama_decode call's end")
    add("g3_no_checkpoints", _conv(Q[:3], max_tokens=10), f=flags("--ctx-checkpoints", "0"),
        note="-ctxcp 0: no checkpoints, so every later turn is processed again from 0")
    return s


def main() -> None:
    model = model_path("gemma3")
    rs.record_some(OUT, sessions(), __doc__, 8271, lambda sess: model)

if __name__ == "__main__":
    main()
