"""Records llama-server b11192's answers to Anthropic Messages requests with `tools` (POST /v1/messages) into
tests/oracle/server/anthropic_tools.json, in the sessions' format of testing/record_server.py (replayed by
tests/test_anthropic_tools.py). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_anthropic_tools.py [--no-check] [--port-base 8291]

One session a template of the autoparser's JSON-native format with per-call markers (Hermes 2 Pro, Qwen 2.5;
the sdist's models/templates/*.jinja given with --chat-template-file), on SmolLM2-135M-Instruct Q4_1, every
server run as `--jinja --reasoning off -t 2 -c 4096 -np 1`. The requests are Anthropic bodies: `tools` with an
`input_schema`, `tool_choice` auto / any / tool / none, histories of `tool_use` and `tool_result` blocks that
SmolLM2 answers with calls, parallel calls, streams (tool_use blocks with input_json_delta events), a call cut
by max_tokens, seeded sampling. Each session is played twice on fresh servers unless --no-check (the calls'
random ids are blanked by tests/server_replay.normalize); one whose runs differ is left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.record_server import record_file  # noqa: E402
from testing.server_sessions import flags, post  # noqa: E402

M = "/v1/messages"

WEATHER = {"name": "get_weather", "description": "Get the current weather in a city",
           "input_schema": {"type": "object",
                            "properties": {"city": {"type": "string", "description": "The city"},
                                           "unit": {"type": "string", "enum": ["c", "f"]}},
                            "required": ["city"]}}
PYTHON = {"name": "python", "description": "Run Python code and return what it prints",
          "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}
NOARGS = {"name": "get_time", "description": "The current time", "input_schema": {"type": "object", "properties": {}}}


def user(content) -> dict:
    return {"role": "user", "content": content}


def called(cid: str, city: str, result: str, answer: str) -> list[dict]:
    """One round: the assistant's tool_use, the user's tool_result, the assistant's answer."""
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": cid, "name": "get_weather",
                                               "input": {"city": city}}]},
            user([{"type": "tool_result", "tool_use_id": cid, "content": result}]),
            {"role": "assistant", "content": answer}]


FEWSHOT = ([user("Weather in Paris?")] + called("c1", "Paris", "18 C", "It is 18 C.")
           + [user("Weather in Rome?")] + called("c2", "Rome", "24 C", "It is 24 C.") + [user("Weather in Berlin?")])
FEWSHOT_TWO = [user("Weather in Paris and Rome?"),
               {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "c1", "name": "get_weather", "input": {"city": "Paris"}},
                   {"type": "tool_use", "id": "c2", "name": "get_weather", "input": {"city": "Rome"}}]},
               user([{"type": "tool_result", "tool_use_id": "c1", "content": "18 C"},
                     {"type": "tool_result", "tool_use_id": "c2", "content": [{"type": "text", "text": "24 C"}]}]),
               {"role": "assistant", "content": "18 C and 24 C."},
               user("Weather in Oslo and Lima?"),
               {"role": "assistant", "content": [
                   {"type": "tool_use", "id": "c3", "name": "get_weather", "input": {"city": "Oslo"}},
                   {"type": "tool_use", "id": "c4", "name": "get_weather", "input": {"city": "Lima"}}]},
               user([{"type": "tool_result", "tool_use_id": "c3", "content": "5 C"},
                     {"type": "tool_result", "tool_use_id": "c4", "content": "20 C"}]),
               {"role": "assistant", "content": "5 C and 20 C."},
               user("Weather in Berlin and Madrid?")]
ASK = [user("What is the weather in Paris?")]


def req(messages, tools, max_tokens, choice=None, **kw) -> dict:
    body = {"model": "smollm2", "max_tokens": max_tokens, "messages": messages, "temperature": 0,
            "tools": tools, **kw}
    if choice is not None:
        body["tool_choice"] = choice
    return post(M, body)


AUTO, ANY, NONE = {"type": "auto"}, {"type": "any"}, {"type": "none"}
NAMED = {"type": "tool", "name": "get_weather"}


def steps() -> list[dict]:
    return [
        req(FEWSHOT, [WEATHER], 48, AUTO),
        req(FEWSHOT, [WEATHER], 48, ANY),
        req(FEWSHOT, [WEATHER], 48),
        req(FEWSHOT, [WEATHER, PYTHON, NOARGS], 48, NAMED),
        req(FEWSHOT, [WEATHER], 48, NONE),
        req(FEWSHOT, [WEATHER], 48, AUTO, stream=True),
        req(FEWSHOT, [WEATHER], 48, ANY, stream=True),
        req(FEWSHOT, [WEATHER], 14, AUTO),
        req(FEWSHOT, [WEATHER], 14, ANY, stream=True),
        req(FEWSHOT_TWO, [WEATHER], 64, AUTO),
        req(FEWSHOT_TWO, [WEATHER, PYTHON], 64, ANY, stream=True),
        req(ASK, [WEATHER], 24, AUTO),
        req(ASK, [WEATHER], 24, AUTO, stream=True),
        req(ASK, [WEATHER], 24, ANY, system="Use the tools when they help."),
        req(FEWSHOT, [WEATHER], 48, AUTO, temperature=0.8),
        req(FEWSHOT, [WEATHER], 48, ANY, temperature=0.9, stream=True),
    ]


TEMPLATES = ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja"]


def sessions() -> list[dict]:
    return [{"name": "anthropic_tools_" + t.split(".")[0].replace("-", "_").lower(),
             "flags": flags("--chat-template-file", "$TEMPLATE:" + t, "--seed", "7"),
             "note": f"{t}: Anthropic tools (tool_use answers), tool_choice auto / any / tool / none, streams",
             "steps": steps()} for t in TEMPLATES]


def main() -> None:
    record_file("anthropic_tools.json", sessions(), __doc__, 8291)


if __name__ == "__main__":
    main()
