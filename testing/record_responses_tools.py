"""Records llama-server b11192's answers to OpenAI Responses requests with function `tools` (POST /v1/responses)
into tests/oracle/server/responses_tools.json, in the sessions' format of testing/record_server.py (replayed by
tests/test_responses_tools.py). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_responses_tools.py [--no-check] [--port-base 8301]

One session a template of the autoparser's JSON-native format with per-call markers (Hermes 2 Pro, Qwen 2.5;
the sdist's models/templates/*.jinja given with --chat-template-file), on SmolLM2-135M-Instruct Q4_1, every
server run as `--jinja --reasoning off -t 2 -c 4096 -np 1`. The requests are Responses bodies: function tools
(`name`, `parameters` at the tool's top level), `tool_choice` auto / required / a named function / none,
histories of `function_call` and `function_call_output` items that SmolLM2 answers with calls, parallel calls,
streams (function_call items with function_call_arguments deltas), a call cut by max_output_tokens, seeded
sampling. Each session is played twice on fresh servers unless --no-check (the calls' random ids are blanked by
tests/server_replay.normalize); one whose runs differ is left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.record_server import record_file  # noqa: E402
from testing.server_sessions import flags, post  # noqa: E402

R = "/v1/responses"

WEATHER = {"type": "function", "name": "get_weather", "description": "Get the current weather in a city",
           "parameters": {"type": "object",
                          "properties": {"city": {"type": "string", "description": "The city"},
                                         "unit": {"type": "string", "enum": ["c", "f"]}},
                          "required": ["city"]}}
PYTHON = {"type": "function", "name": "python", "description": "Run Python code and return what it prints",
          "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}
NOARGS = {"type": "function", "name": "get_time", "description": "The current time",
          "parameters": {"type": "object", "properties": {}}}
SEARCH = {"type": "web_search"}     # no chat equivalent: dropped by the rewrite


def user(content) -> dict:
    return {"role": "user", "content": content}


def said(answer: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]}


def call(cid: str, city: str) -> dict:
    return {"type": "function_call", "call_id": cid, "name": "get_weather", "arguments": '{"city": "%s"}' % city}


def output(cid: str, result) -> dict:
    return {"type": "function_call_output", "call_id": cid, "output": result}


def called(cid: str, city: str, result: str, answer: str) -> list[dict]:
    """One round: the assistant's function_call, its function_call_output, the assistant's answer."""
    return [call(cid, city), output(cid, result), said(answer)]


FEWSHOT = ([user("Weather in Paris?")] + called("c1", "Paris", "18 C", "It is 18 C.")
           + [user("Weather in Rome?")] + called("c2", "Rome", "24 C", "It is 24 C.") + [user("Weather in Berlin?")])
FEWSHOT_TWO = [user("Weather in Paris and Rome?"), call("c1", "Paris"), call("c2", "Rome"),
               output("c1", "18 C"), output("c2", [{"type": "input_text", "text": "24 C"}]),
               said("18 C and 24 C."),
               user("Weather in Oslo and Lima?"), call("c3", "Oslo"), call("c4", "Lima"),
               output("c3", "5 C"), output("c4", "20 C"), said("5 C and 20 C."),
               user("Weather in Berlin and Madrid?")]
ASK = "What is the weather in Paris?"


def req(items, tools, max_output_tokens, choice=None, **kw) -> dict:
    body = {"model": "smollm2", "input": items, "max_output_tokens": max_output_tokens, "temperature": 0,
            "tools": tools, **kw}
    if choice is not None:
        body["tool_choice"] = choice
    return post(R, body)


NAMED = {"type": "function", "name": "get_weather"}


def steps() -> list[dict]:
    return [
        req(FEWSHOT, [WEATHER], 48, "auto"),
        req(FEWSHOT, [WEATHER], 48, "required"),
        req(FEWSHOT, [WEATHER], 48),
        req(FEWSHOT, [WEATHER, PYTHON, NOARGS], 48, NAMED),
        req(FEWSHOT, [WEATHER], 48, "none"),
        req(FEWSHOT, [WEATHER], 48, "auto", stream=True),
        req(FEWSHOT, [WEATHER], 48, "required", stream=True),
        req(FEWSHOT, [WEATHER], 14, "auto"),
        req(FEWSHOT, [WEATHER], 14, "required", stream=True),
        req(FEWSHOT_TWO, [WEATHER], 64, "auto", parallel_tool_calls=True),
        req(FEWSHOT_TWO, [WEATHER, PYTHON], 64, "required", parallel_tool_calls=True, stream=True),
        req(ASK, [WEATHER], 24, "auto"),
        req(ASK, [WEATHER], 24, "auto", stream=True),
        req(ASK, [WEATHER], 24, "required", instructions="Use the tools when they help."),
        req(FEWSHOT, [SEARCH, WEATHER], 48, "auto", temperature=0.8),
        req(FEWSHOT, [WEATHER], 48, "required", temperature=0.9, stream=True),
    ]


TEMPLATES = ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja"]


def sessions() -> list[dict]:
    return [{"name": "responses_tools_" + t.split(".")[0].replace("-", "_").lower(),
             "flags": flags("--chat-template-file", "$TEMPLATE:" + t, "--seed", "7"),
             "note": f"{t}: Responses function tools (function_call items), tool_choice auto / required / named / "
                     "none, streams",
             "steps": steps()} for t in TEMPLATES]


def main() -> None:
    record_file("responses_tools.json", sessions(), __doc__, 8301)


if __name__ == "__main__":
    main()
