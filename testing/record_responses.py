"""Records llama-server b11192's answers to OpenAI Responses requests (POST /v1/responses, /responses,
/v1/responses/input_tokens, /responses/input_tokens) into tests/oracle/server/responses.json, in the sessions'
format of testing/record_server.py (replayed by tests/test_responses.py). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_responses.py [--no-check] [--port-base 8201]

Each session runs on a fresh llama-server (SmolLM2-135M-Instruct Q4_1, written `$MODEL`), twice unless
--no-check: a session whose two runs differ after normalization is reported and left out. The server runs with
`-lv 5` (debug log, no other change: verbose answers need a verbosity above 9, server-schema.cpp:537), so that
each step of /v1/responses also keeps the chat body llama-server converted the request into (its
"converted request: ..." log line, server-context.cpp:4992), as `converted`; the tests compare
families.responses.convert with it.
Sampling is greedy (temperature 0) except in the seeded requests, which give a seed in the body (the rewrite
passes every key it does not know through to the chat step).
Function tools are recorded by testing/record_responses_tools.py (responses_tools.json).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.oracle import LlamaServer  # noqa: E402
from testing.record_server import record_file  # noqa: E402
from testing.server_sessions import flags, post  # noqa: E402
import server_replay as sr  # noqa: E402

R = "/v1/responses"
T = "/v1/responses/input_tokens"
MARK = "converted request: "


def item(content, role="user", **kw) -> dict:
    return {"role": role, "content": content, **kw}


def out_msg(text, **kw) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}], **kw}


def req(input_, max_output_tokens=12, **kw) -> dict:
    return {"model": "smollm2", "input": input_, "max_output_tokens": max_output_tokens, "temperature": 0, **kw}


SUITE = [item("Book", "system"), item("What is the best book")]
TURNS = [item("My name is Ada."), out_msg("Nice to meet you, Ada."),
         item([{"type": "input_text", "text": "What is my name?"}, {"type": "input_text", "text": " Be brief."}])]
CALLS = [item("What is 6 times 7?"),
         {"type": "function_call", "call_id": "call_1", "name": "multiply", "arguments": "{\"a\":6,\"b\":7}"},
         {"type": "function_call_output", "call_id": "call_1", "output": "42"}]
MERGED = [item("Hi"), out_msg("Hello"), out_msg(" again", id="msg_1", status="completed"),
          {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "greet"}]},
          item("Who are you?")]
PREFILL = [item("Name a colour."), {"type": "message", "role": "assistant", "content": "The colour is"}]
UNICODE = "Café, naïve, 日本語: repeat these words."


def answers() -> list[dict]:
    s = [
        post(R, req("Hello")),
        post(R, req("Hello", instructions="Be brief.")),
        post(R, req(SUITE, 8)),
        post(R, req(TURNS, 16)),
        post(R, req([item("Say hi", "developer"), item("Hi")])),
        post(R, req([{"type": "message", "role": "user", "content": "hey", "id": "m1", "status": "completed"}])),
        post(R, req("Hello", 1)),
        post(R, req("What is 2+2? Answer with the number only.", 64)),
        post(R, req("Tell me about the sea.", 40, stop=[" sea", "water"])),
        post(R, req("Hello", reasoning={"effort": "low", "summary": "auto"})),
        post(R, req(PREFILL)),
        post(R, req(CALLS, 16)),
        post(R, req(MERGED)),
        post(R, req("Hello", tools=[{"type": "web_search"}, {"type": "file_search"}])),
        post(R, req("Hello", previous_response_id="", store=False, truncation="disabled",
                    text={"format": {"type": "text"}}, metadata={"k": "v"}, user="u-1", top_p=0.5)),
        post(R, req(UNICODE, 24)),
        post(R, req("Hello", instructions=5)),
        post(R, {"model": "smollm2", "input": "Hello", "max_output_tokens": 20, "temperature": 0.9, "seed": 42}),
        post(R, {"input": "Hello", "max_tokens": 3, "temperature": 0}),
        post(R, req([])),
        post("/responses", req("Hi there")),
        # streams
        post(R, req("Hello", stream=True)),
        post(R, req("Hello", instructions="Be brief.", stream=True)),
        post(R, req(SUITE, 8, stream=True)),
        post(R, req(TURNS, 16, stream=True)),
        post(R, req("Hello", 1, stream=True)),
        post(R, req("Tell me about the sea.", 40, stop=[" sea", "water"], stream=True)),
        post(R, req("What is 2+2? Answer with the number only.", 64, stream=True)),
        post(R, req(UNICODE, 24, stream=True)),
        post(R, req(PREFILL, stream=True)),
        post(R, req("This is a test " * 10, 8, stream=True, timings_per_token=True, return_progress=True)),
        post(R, {"model": "smollm2", "input": "Hello", "max_output_tokens": 20, "temperature": 0.9, "seed": 42,
                 "top_p": 0.9, "stream": True}),
        post("/responses", req("Hi there", stream=True)),
        # input_tokens
        post(T, {"model": "smollm2", "input": "Hello"}),
        post(T, {"model": "smollm2", "input": TURNS, "instructions": "Be brief."}),
        post("/responses/input_tokens", {"model": "smollm2", "input": SUITE, "max_output_tokens": 5}),
    ]
    bad = [
        {"raw": "{not json"},
        {"body": [1, 2]},
        {"body": {"model": "smollm2", "max_output_tokens": 5}},
        {"body": req("Hi", previous_response_id="resp_123")},
        {"body": req(5)},
        {"body": req({"role": "user", "content": "hi"})},
        {"body": req(["hi"])},
        {"body": req([item([{"type": "input_text"}])])},
        {"body": req([item([{"type": "input_file", "file_id": "f"}])])},
        {"body": req([item([{"type": "text", "text": "hi"}])])},
        {"body": req([item([{"type": "input_image", "detail": "auto"}])])},
        {"body": req([item([{"type": "input_image", "image_url": "https://example.com/a.png"}])])},
        {"body": req([item("Hi"), item("Hello", "assistant"), item("Again")])},
        {"body": req([item("Hi"), {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "x"}]}])},
        {"body": req([item("Hi"), {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": 5}]}])},
        {"body": req([item("Hi"), {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}, item("x")])},
        {"body": req([item("Hi"), {"type": "reasoning", "summary": [], "content": []}])},
        {"body": req([item("Hi"), {"type": "reasoning", "summary": [], "content": "t"}])},
        {"body": req([item("Hi"), {"type": "reasoning", "summary": [], "content": [{"text": 1}]}])},
        {"body": req([item("Hi"), {"type": "function_call_output", "call_id": "c", "output": [{"text": "4"}]}])},
        {"body": req([item("Hi"), {"type": "function_call_output", "call_id": "c", "output": [{"type": "x"}]}])},
        {"body": req([item("Hi"), {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_image"}]}])},
        {"body": req([item("hi", "wizard")])},
        {"body": req("Hi", tools={"type": "function"})},
        {"body": req("Hi", max_output_tokens="many")},
        {"body": req("Hi", temperature="hot")},
        {"body": req("Hi", stream=True, top_k="k")},
        {"body": req([item(5)])},
    ]
    for b in bad:
        s.append({"method": "POST", "path": R, **b})
    for b in bad[:6]:
        s.append({"method": "POST", "path": T, **b})
    return s


def sessions() -> list[dict]:
    return [{"name": "responses", "flags": flags(), "note": "OpenAI Responses: answers, streams, input_tokens, "
             "refusals (greedy, or seeded in the body)", "steps": answers()}]


def _converted(path: Path, seen: int, wait: float) -> tuple[list, int]:
    """The chat bodies logged after the first `seen` (waiting up to `wait` s for one more)."""
    deadline = time.time() + wait
    while True:
        found = [line.split(MARK, 1)[1] for line in path.read_text(errors="replace").splitlines() if MARK in line]
        if len(found) > seen or time.time() >= deadline:
            return [json.loads(x) for x in found[seen:]], len(found)
        time.sleep(0.05)


def play(sess: dict, model: str, port: int) -> list[dict]:
    log = Path(f"/tmp/record_responses_{sess['name']}.log")
    steps, seen = [], 0
    base = sr.server_argv(sess["flags"], model)[2:]
    with LlamaServer(model, port=port, base_args=base, extra=["-lv", "5"], log=str(log)) as srv:
        for r in sess["steps"]:
            ans = sr.substitute_model(sr.exchange(srv.port, r), model)
            step = {"request": r, "answer": ans}
            if r["path"] in (R, "/responses"):
                got, seen = _converted(log, seen, 1.0 if ans["status"] == 200 else 0.5)
                assert len(got) <= 1, got
                if got:
                    step["converted"] = got[0]
            steps.append(step)
    return steps


def main() -> None:
    record_file("responses.json", sessions(), __doc__, 8201, play)

if __name__ == "__main__":
    main()
