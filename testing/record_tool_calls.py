"""Records llama-server b11192's answers to chat requests with `tools` (POST /v1/chat/completions) into
tests/oracle/server/tool_calls.json, in the sessions' format of testing/record_server.py (replayed by
tests/test_tool_calls.py). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_tool_calls.py [--no-check] [--only NAME ...] [--port-base 8231]
    PYTHONPATH=. python testing/record_tool_calls.py --targets     # tests/oracle/server/tool_call_targets.json
    PYTHONPATH=. python testing/record_tool_calls.py --calls       # tests/oracle/server/tool_call_answers.json
    PYTHONPATH=. python testing/record_tool_calls.py --formats     # tests/oracle/server/tool_call_formats.json
    PYTHONPATH=. python testing/record_tool_calls.py --tag-json    # tests/oracle/server/tool_call_tag_json.json
    PYTHONPATH=. python testing/record_tool_calls.py --thinking    # tests/oracle/server/tool_call_thinking.json

One session per template: SmolLM2-135M-Instruct Q4_1's own (written `$MODEL`), and the sdist's
models/templates/*.jinja given with --chat-template-file (`$TEMPLATE:NAME`), every server run as
`--jinja --reasoning off -t 2 -c 4096 -np 1`. Each session is played twice on fresh servers unless --no-check;
one whose two runs differ is reported and left out.

What is recorded is what bankml reproduces (bankml.chat.tools): on a template without tool-call support every
tool_choice (auto, none, required, a named function), parallel_tool_calls, streams, logprobs, tool results in
the history, and the refusals; on a template that supports tool calls, tool_choice "none" (the tools rendered
into the prompt, the content parser, no grammar). With --calls: parsed tool calls on the templates of the
autoparser's JSON-native format with per-call markers (tool_choice auto / required, few-shot histories SmolLM2
answers with calls, parallel calls, streamed tool_calls deltas; bankml.grammar.chat_tools); two oracle runs
differ in the calls' random ids only, which tests/server_replay.normalize blanks. With --formats: the autoparser's
other JSON-native formats (section markers, arrays, ids, no marker, the name as the key; FORMATS), ten requests
a template (format_steps). With --thinking: templates that think, in those formats (THINKING: the reasoning parser
before the tool parser, reasoning_content beside the calls, thinking enabled per request). Sampling is greedy
except the `seed` requests.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.oracle import model_path  # noqa: E402
from testing.record_server import OUT, Ports, play, unstable  # noqa: E402
from testing.server_sessions import flags, post  # noqa: E402

P = "/v1/chat/completions"

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
                                                    "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
PYTHON = {"type": "function", "function": {
    "name": "python", "description": "Run Python code and return what it prints",
    "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}}
NOARGS = {"type": "function", "function": {"name": "get_time", "description": "The current time",
                                           "parameters": {"type": "object", "properties": {}}}}
TOOLS = [WEATHER]
TWO = [WEATHER, PYTHON]
THREE = [WEATHER, PYTHON, NOARGS]


def user(text: str) -> dict:
    return {"role": "user", "content": text}


ASK = [user("What is the weather in Paris?")]
CODE = [{"role": "system", "content": "You can run code."}, user("Print the first five primes with Python.")]
CALLED = [user("What is the weather in Paris?"),
          {"role": "assistant", "content": None, "tool_calls": [
              {"id": "call_1", "type": "function",
               "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 18, \"sky\": \"cloudy\"}"}]
CALLED_TWICE = [user("Weather in Paris and in Rome?"),
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "a1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                    {"id": "a2", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\", \"unit\": \"c\"}"}}]},
                {"role": "tool", "tool_call_id": "a1", "content": "18 C"},
                {"role": "tool", "tool_call_id": "a2", "content": "24 C"}]


def chat(messages, tools=TOOLS, max_tokens=16, **kw) -> dict:
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, **kw}
    if tools is not None:
        body["tools"] = tools
    return post(P, body)


def all_choices() -> list[dict]:
    """Requests for a template without tool-call support: llama-server answers every tool_choice as content."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    return [
        chat(ASK),
        chat(ASK, tool_choice="auto"),
        chat(ASK, tool_choice="required"),
        chat(ASK, tool_choice="none"),
        chat(ASK, tool_choice=named),
        chat(ASK, TWO, tool_choice="required", parallel_tool_calls=True),
        chat(ASK, TWO, parallel_tool_calls=False),
        chat(CODE, THREE, 24, tool_choice="required"),
        chat(CALLED, TOOLS, 20),
        chat(CALLED_TWICE, TWO, 20, tool_choice="required"),
        chat(ASK, logprobs=True, top_logprobs=3, tool_choice="required"),
        chat(ASK, stream=True),
        chat(ASK, stream=True, tool_choice="required"),
        chat(CALLED, TOOLS, 20, stream=True, stream_options={"include_usage": True}),
        chat(ASK, TWO, stream=True, tool_choice=named, parallel_tool_calls=True),
        chat(ASK, max_tokens=24, temperature=0.8, seed=42, tool_choice="required"),
        chat(ASK, max_tokens=24, temperature=0.8, seed=7, stream=True),
        # refusals
        chat(ASK, logprobs=True, stream=True),
        chat(ASK, grammar="root ::= \"yes\""),
        chat(ASK, tool_choice="sometimes"),
        chat(ASK, tools=[{"type": "function"}]),
        chat(ASK, tools=[{"type": "retrieval", "function": {"name": "x"}}]),
        chat(ASK, grammar="root ::= \"yes\"", tool_choice="none"),
    ]


def choice_none() -> list[dict]:
    """Requests for a template that supports tool calls: tool_choice "none" (the content parser, no grammar)."""
    return [
        chat(ASK, tool_choice="none"),
        chat(ASK, TWO, tool_choice="none", parallel_tool_calls=True),
        chat(CODE, THREE, 20, tool_choice="none"),
        chat(CALLED, TOOLS, 20, tool_choice="none"),
        chat(CALLED_TWICE, TWO, 20, tool_choice="none"),
        chat(ASK, tool_choice="none", logprobs=True, top_logprobs=2),
        chat(ASK, tool_choice="none", stream=True),
        chat(CALLED, TOOLS, 16, tool_choice="none", stream=True),
        chat(ASK, tool_choice="none", max_tokens=16, temperature=0.8, seed=3),
        chat(ASK, tool_choice="none", logprobs=True, stream=True),
        chat(ASK, tool_choice="none", grammar="root ::= \"ok\"", max_tokens=4),
    ]


# Templates that think (SmolLM3, DeepSeek R1 and its Distill Llama, Granite 3.3, Command R7B, Qwen3) are refused
# by bankml.chat.tools; Phi 3.5 and Gemma 2 are left out: the recorder's comparison of two oracle runs rejects
# their logprobs answers ("body is not compact JSON with raw UTF-8", a token piece that is not valid UTF-8).
NO_TOOL_SUPPORT: list[str] = []
TOOL_SUPPORT = ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
                "mistralai-Mistral-Nemo-Instruct-2407.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                "meetkai-functionary-medium-v3.1.jinja", "fireworks-ai-llama-3-firefunction-v2.jinja",
                "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "ibm-granite-granite-4.0.jinja",
                "meta-llama-Llama-3.2-3B-Instruct.jinja"]


def _name(template: str) -> str:
    return "tools_" + template.removesuffix(".jinja").replace(".", "_").replace("-", "_").lower()


def sessions() -> list[dict]:
    out = [{"name": "tools_smollm2", "flags": flags(), "note": "SmolLM2's own template (no tool support): "
            "every tool_choice answered as content", "steps": all_choices()}]
    for t in NO_TOOL_SUPPORT:
        out.append({"name": _name(t), "flags": flags("--chat-template-file", "$TEMPLATE:" + t),
                    "note": f"{t} (no tool-call support): every tool_choice answered as content",
                    "steps": all_choices()})
    for t in TOOL_SUPPORT:
        out.append({"name": _name(t), "flags": flags("--chat-template-file", "$TEMPLATE:" + t),
                    "note": f"{t} (tool calls): tool_choice none", "steps": choice_none()})
    return out


FEWSHOT = [user("Weather in Paris?"),
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
           {"role": "tool", "tool_call_id": "c1", "content": "18 C"}, {"role": "assistant", "content": "It is 18 C."},
           user("Weather in Rome?"),
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "c2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}}]},
           {"role": "tool", "tool_call_id": "c2", "content": "24 C"}, {"role": "assistant", "content": "It is 24 C."},
           user("Weather in Berlin?")]
TARGETS = ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
           "meta-llama-Llama-3.1-8B-Instruct.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
           "meetkai-functionary-medium-v3.2.jinja", "openai-gpt-oss-120b.jinja", "Qwen3-Coder.jinja",
           "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", "unsloth-mistral-Devstral-Small-2507.jinja"]


def _call(i: int, city: str) -> dict:
    return {"id": f"c{i}", "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}


# two rounds of two calls in one message: SmolLM2 then answers the third question with two calls
FEWSHOT_TWO = [user("Weather in Paris and Rome?"),
               {"role": "assistant", "content": None, "tool_calls": [_call(1, "Paris"), _call(2, "Rome")]},
               {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
               {"role": "tool", "tool_call_id": "c2", "content": "24 C"},
               {"role": "assistant", "content": "18 C and 24 C."},
               user("Weather in Oslo and Lima?"),
               {"role": "assistant", "content": None, "tool_calls": [_call(3, "Oslo"), _call(4, "Lima")]},
               {"role": "tool", "tool_call_id": "c3", "content": "5 C"},
               {"role": "tool", "tool_call_id": "c4", "content": "20 C"},
               {"role": "assistant", "content": "5 C and 20 C."},
               user("Weather in Berlin and Madrid?")]
FEWSHOT_CODE = [user("Print 1 with Python."),
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "python",
                                                                  "arguments": "{\"code\": \"print(1)\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "1"},
                {"role": "assistant", "content": "It printed 1."}, user("Print 2 with Python.")]


def tool_call_steps() -> list[dict]:
    """Requests for a template whose tool-call format bankml parses (the autoparser's JSON-native format with
    per-call markers): tool_choice auto (a lazy grammar) and required, few-shot histories SmolLM2 answers with
    one call or several, parallel_tool_calls, streams, a call cut by the token limit, logprobs (not streamed),
    seeded sampling, a named tool_choice (read as auto)."""
    named = {"type": "function", "function": {"name": "get_weather"}}
    return [
        chat(FEWSHOT, TOOLS, 48, tool_choice="auto"),
        chat(FEWSHOT, TOOLS, 48, tool_choice="required"),
        chat(FEWSHOT, TOOLS, 48),
        chat(FEWSHOT, TOOLS, 48, tool_choice="auto", stream=True),
        chat(FEWSHOT, TOOLS, 48, tool_choice="required", stream=True,
             stream_options={"include_usage": True}),
        chat(FEWSHOT, TOOLS, 14, tool_choice="auto"),
        chat(FEWSHOT, TOOLS, 14, tool_choice="required", stream=True),
        chat(FEWSHOT, TWO, 48, tool_choice="auto", parallel_tool_calls=True),
        chat(FEWSHOT, TWO, 48, tool_choice="required", parallel_tool_calls=False),
        chat(FEWSHOT, THREE, 48, tool_choice=named),
        chat(FEWSHOT_TWO, TOOLS, 64, tool_choice="auto"),
        chat(FEWSHOT_TWO, TOOLS, 64, tool_choice="required", parallel_tool_calls=True, stream=True),
        chat(FEWSHOT_TWO, TWO, 64, tool_choice="auto", parallel_tool_calls=False, stream=True),
        chat(FEWSHOT_TWO, TWO, 64, tool_choice="auto", parallel_tool_calls=True, logprobs=True, top_logprobs=1),
        chat(FEWSHOT_TWO, TOOLS, 40, tool_choice="auto", stream=True, stream_options={"include_usage": True}),
        chat(FEWSHOT_CODE, THREE, 48, tool_choice="auto"),
        chat(FEWSHOT_CODE, THREE, 48, tool_choice="required", stream=True),
        chat(ASK, TOOLS, 24, tool_choice="auto"),
        chat(ASK, TOOLS, 24, tool_choice="required"),
        chat(ASK, TOOLS, 24, tool_choice="auto", stream=True),
        chat(FEWSHOT, TOOLS, 48, tool_choice="auto", logprobs=True, top_logprobs=2),
        chat(FEWSHOT, TOOLS, 48, tool_choice="auto", temperature=0.8, seed=5),
        chat(FEWSHOT, TOOLS, 48, tool_choice="required", temperature=0.9, seed=11, stream=True),
    ]


# Templates of the autoparser's JSON-native format with per-call markers `<tool_call>\n` ... `</tool_call>`
TOOL_CALL_FORMAT = ["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
                    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", "Qwen-Qwen2.5-7B-Instruct.jinja",
                    "ibm-granite-granite-4.0.jinja"]


def call_sessions() -> list[dict]:
    return [{"name": _name(t).replace("tools_", "calls_", 1), "flags": flags("--chat-template-file", "$TEMPLATE:" + t),
             "note": f"{t} (JSON-native tool calls, per-call markers): tool_choice auto / required",
             "steps": tool_call_steps()} for t in TOOL_CALL_FORMAT]


# The autoparser's other JSON-native shapes (bankml.grammar.chat_tools): no markers and "parameters" with the
# OpenAI wrapper accepted (Llama 3.x), a section marker around an array with ids (Mistral Nemo), a section
# marker around an array (Firefunction v2, Apriel 1.5), a section marker around bare objects (MiniMax-M1), a
# section marker without an end and no parallel calls (GigaChat 3.1), the function name as the key (Apertus).
FORMATS = ["MiniMax-M1.jinja", "fireworks-ai-llama-3-firefunction-v2.jinja", "GigaChat3.1-10B-A1.8B.jinja",
           "unsloth-Apriel-1.5.jinja", "mistralai-Mistral-Nemo-Instruct-2407.jinja",
           "meta-llama-Llama-3.1-8B-Instruct.jinja", "Apertus-8B-Instruct.jinja",
           "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja"]

# calls only in the history (no assistant text): SmolLM2 answers the third question with a call on MiniMax-M1,
# Firefunction v2, GigaChat 3.1 and Apriel 1.5
CALLS_ONLY = [user("Weather in Paris?"),
              {"role": "assistant", "content": None, "tool_calls": [_call(1, "Paris")]},
              {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
              user("Weather in Rome?"),
              {"role": "assistant", "content": None, "tool_calls": [_call(2, "Rome")]},
              {"role": "tool", "tool_call_id": "c2", "content": "24 C"},
              user("Weather in Berlin?")]


def format_steps() -> list[dict]:
    """Ten requests a template (the machine's load keeps the sessions short): tool_choice auto and required on
    a history of calls, streamed and not, a call cut by the token limit, parallel calls with logprobs, the
    few-shot histories of tool_call_steps, a content answer, seeded sampling."""
    return [
        chat(CALLS_ONLY, TOOLS, 40, tool_choice="auto"),
        chat(CALLS_ONLY, TOOLS, 40, tool_choice="required"),
        chat(CALLS_ONLY, TOOLS, 40, tool_choice="auto", stream=True, stream_options={"include_usage": True}),
        chat(CALLS_ONLY, TOOLS, 40, tool_choice="required", stream=True),
        chat(CALLS_ONLY, TOOLS, 12, tool_choice="auto"),
        chat(CALLS_ONLY, TWO, 40, tool_choice="auto", parallel_tool_calls=True, logprobs=True, top_logprobs=2),
        chat(FEWSHOT, TOOLS, 32, tool_choice="auto"),
        chat(FEWSHOT_TWO, TWO, 48, tool_choice="required", parallel_tool_calls=True, stream=True),
        chat(ASK, TOOLS, 16, tool_choice="auto"),
        chat(CALLS_ONLY, TOOLS, 40, tool_choice="required", temperature=0.9, seed=11, stream=True),
    ]


def _nine_char_ids(step: dict) -> dict:
    """The same request with the history's call ids made 9 alphanumeric characters ("c1" -> "call00001"), as
    Mistral Nemo's template requires."""
    step = json.loads(json.dumps(step))
    for m in step["body"]["messages"]:
        for c in m.get("tool_calls") or []:
            c["id"] = "call0000" + c["id"][1:]
        if m.get("tool_call_id"):
            m["tool_call_id"] = "call0000" + m["tool_call_id"][1:]
    return step


def format_sessions() -> list[dict]:
    out = []
    for t in FORMATS:
        steps = format_steps()
        if "Mistral-Nemo" in t:
            steps = [_nine_char_ids(s) for s in steps]
        out.append({"name": _name(t).replace("tools_", "calls_", 1),
                    "flags": flags("--chat-template-file", "$TEMPLATE:" + t),
                    "note": f"{t} (JSON-native tool calls): tool_choice auto / required", "steps": steps})
    return out


# The autoparser's TAG_WITH_JSON format on the sdist templates that do not think and have no specialized handler
# (bankml.grammar.chat_tools): `<function=NAME>{args}</function>` (Functionary v3.1), `[TOOL_CALLS]NAME[ARGS]
# [CALL_ID]ID[ARGS]{args}` (Mistral Small 3.2: the name's suffix, then a call id before the arguments),
# `<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>NAME<|tool_call:args|>{args}<|tool_call:end|>
# <|calls|>` (Solar Open: the probe's id is taken into the name's prefix). Devstral Small 2507 analyses the same
# as Mistral Small 3.2 without the id, but chat.cpp gives it the Ministral 3 handler: its target is kept.
TAG_JSON = ["upstage-Solar-Open-100B.jinja", "meetkai-functionary-medium-v3.1.jinja",
            "Mistral-Small-3.2-24B-Instruct-2506.jinja"]


# one call and two calls written in each template's format (the form its grammar accepts): SmolLM2 copies them
# when the history shows the copy once ("Copy this line: ..." / the line / the same request again)
TAG_JSON_LINES = {
    "meetkai-functionary-medium-v3.1.jinja": (
        '<function=get_weather>{"city": "Berlin"}</function>',
        '<function=get_weather>{"city": "Berlin"}</function><function=python>{"code": "print(1)"}</function>'),
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": (
        '[TOOL_CALLS]get_weather[ARGS][CALL_ID]abc123def[ARGS]{"city": "Berlin"}',
        '[TOOL_CALLS]get_weather[ARGS][CALL_ID]abc123def[ARGS]{"city": "Berlin"}'
        '[TOOL_CALLS]python[ARGS][ARGS]{"code": "print(1)"}'),
    "upstage-Solar-Open-100B.jinja": (
        '<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>get_weather<|tool_call:args|>'
        '{"city": "Berlin"}<|tool_call:end|><|calls|>',
        '<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>get_weather<|tool_call:args|>'
        '{"city": "Berlin"}<|tool_call:end|><|tool_call:begin|>call00001<|tool_call:name|>python'
        '<|tool_call:args|>{"code": "print(1)"}<|tool_call:end|><|calls|>')}


def _copy(line: str) -> list[dict]:
    return [user("Copy this line: " + line), {"role": "assistant", "content": line}, user("Copy this line: " + line)]


def tag_json_steps(template: str) -> list[dict]:
    """Eleven requests a template: the copy histories SmolLM2 answers with one call and with two (tool_choice
    auto / required / unset, streamed and not, a call cut by the token limit, parallel calls with logprobs and
    parallel_tool_calls false), a history of calls only, a content answer, seeded sampling."""
    one, two = (_copy(x) for x in TAG_JSON_LINES[template])
    return [
        chat(one, TOOLS, 48, tool_choice="auto"),
        chat(one, TOOLS, 48, tool_choice="required"),
        chat(one, TOOLS, 48, tool_choice="auto", stream=True, stream_options={"include_usage": True}),
        chat(one, TOOLS, 48, tool_choice="required", stream=True),
        chat(one, TOOLS, 10, tool_choice="auto"),
        chat(two, TWO, 72, tool_choice="auto", parallel_tool_calls=True, logprobs=True, top_logprobs=2),
        chat(two, TWO, 72, tool_choice="required", parallel_tool_calls=False, stream=True),
        chat(one, TOOLS, 48),
        chat(CALLS_ONLY, TOOLS, 24, tool_choice="auto"),
        chat(ASK, TOOLS, 16, tool_choice="auto"),
        chat(one, TOOLS, 48, tool_choice="required", temperature=0.9, seed=11, stream=True),
    ]


def tag_json_sessions() -> list[dict]:
    out = []
    for t in TAG_JSON:
        steps = tag_json_steps(t)
        if "Mistral-Small" in t:
            steps = [_nine_char_ids(s) for s in steps]
        out.append({"name": _name(t).replace("tools_", "tagjson_", 1),
                    "flags": flags("--chat-template-file", "$TEMPLATE:" + t),
                    "note": f"{t} (TAG_WITH_JSON tool calls): tool_choice auto / required", "steps": steps})
    return out


# Templates that think (the autoparser's reasoning parser before the tool parser) in formats bankml builds:
# JSON-native with per-call markers (Qwen3, QwQ, Bielik, Reka Edge), with a section around an array (Apriel 1.6)
# and TAG_WITH_JSON (DeepSeek R1 Distill Qwen, DeepSeek V3.1, llama.cpp's DeepSeek R1). Each line is a call in
# the template's format, which SmolLM2 copies (see _copy), after a reasoning block (which the templates drop
# from the history).
_THINK = "<think>\nThe user wants the weather.\n</think>\n\n"
_HERMES = _THINK + '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Berlin"}}\n</tool_call>'
_R1 = ('<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Berlin"}\n```'
       '<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
THINKING_LINES = {
    "Qwen-Qwen3-0.6B.jinja": _HERMES, "Qwen-QwQ-32B.jinja": _HERMES, "Bielik-11B-v3.0-Instruct.jinja": _HERMES,
    "Reka-Edge.jinja": _HERMES,
    "Apriel-1.6-15b-Thinker-fixed.jinja": '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Berlin"}}]'
                                          '</tool_calls>',
    "llama-cpp-deepseek-r1.jinja": _THINK + _R1,
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": _THINK + _R1 + "<｜end▁of▁sentence｜>",
    "deepseek-ai-DeepSeek-V3.1.jinja": _THINK + '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>'
                                                '{"city": "Berlin"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'}
THINKING = list(THINKING_LINES)


def _thought_call(i: int, city: str, reasoning: str) -> dict:
    return {"role": "assistant", "content": "", "reasoning_content": reasoning, "tool_calls": [_call(i, city)]}


# an agent loop after the user's question: two calls, each after reasoning, and their results. The templates keep
# the reasoning of the turns after the last user message, and SmolLM2 goes on with reasoning and a call (Qwen3)
AGENT = [user("Weather in Paris, Rome and Oslo?"), _thought_call(1, "Paris", "First Paris."),
         {"role": "tool", "tool_call_id": "c1", "content": "18 C"}, _thought_call(2, "Rome", "Now Rome."),
         {"role": "tool", "tool_call_id": "c2", "content": "24 C"}]


def thinking_steps(template: str) -> list[dict]:
    """Six requests a template: the copy history (thinking off: the server's --reasoning off) under tool_choice
    auto, and required streamed (with usage); the agent loop with thinking enabled per request
    (chat_template_kwargs) under auto, required streamed, auto streamed and cut by the token limit, and auto
    with reasoning_format "none"."""
    one = _copy(THINKING_LINES[template])
    think = {"chat_template_kwargs": {"enable_thinking": True}}
    return [
        chat(one, TOOLS, 64, tool_choice="auto"),
        chat(one, TOOLS, 64, tool_choice="required", stream=True, stream_options={"include_usage": True}),
        chat(AGENT, TOOLS, 48, tool_choice="auto", **think),
        chat(AGENT, TOOLS, 48, tool_choice="required", stream=True, **think),
        chat(AGENT, TOOLS, 6, tool_choice="auto", stream=True, **think),
        chat(AGENT, TOOLS, 48, tool_choice="auto", reasoning_format="none", **think),
    ]


def thinking_sessions() -> list[dict]:
    return [{"name": _name(t).replace("tools_", "think_", 1), "flags": flags("--chat-template-file", "$TEMPLATE:" + t),
             "note": f"{t} (thinks; tool calls after the reasoning parser): tool_choice auto / required",
             "steps": thinking_steps(t)} for t in THINKING]


def record_targets(model: str, ports: Ports, only=()) -> None:
    """What bankml does not reproduce yet, kept as the target of the next step: for each template that supports
    tool calls, llama-server's answer (verbose: the grammar, its laziness and triggers, the preserved tokens)
    to tool_choice auto and required on a few-shot history SmolLM2 answers with a call. Not replayed (bankml
    refuses these requests with its 501); tests/test_tool_calls.py checks that refusal."""
    out = []
    path = OUT / "tool_call_targets.json"
    old = {s["template"]: s for s in json.loads(path.read_text())} if path.exists() else {}
    for t in TARGETS + [f for f in FORMATS + TAG_JSON + THINKING if f not in TARGETS]:
        if only and t not in only:
            if t in old:
                out.append(old[t])
            continue
        steps = [chat(FEWSHOT, TOOLS, 30, tool_choice=c, verbose=True) for c in ("auto", "required")]
        if "Mistral-Nemo" in t or "Mistral-Small" in t:
            steps = [_nine_char_ids(s) for s in steps]
        sess = {"name": _name(t), "flags": flags("--chat-template-file", "$TEMPLATE:" + t), "steps": steps}
        played = play(sess, model, ports.next())
        rec = []
        for st in played:
            a = st["answer"]
            row = {"request": st["request"], "status": a["status"]}
            if "json" in a and isinstance(a["json"], dict) and "choices" in a["json"]:
                row["choice"] = a["json"]["choices"][0]
                gs = a["json"].get("__verbose", {}).get("generation_settings", {})
                row.update({k: gs.get(k) for k in ("grammar", "grammar_lazy", "grammar_triggers",
                                                   "preserved_tokens", "chat_format", "generation_prompt")})
            elif "sse" in a:
                row["sse"] = a["sse"]
            else:
                row["body"] = a.get("json", a.get("text"))
            rec.append(row)
        print(f"{sess['name']}: {[r['status'] for r in rec]} "
              f"{[r.get('choice', {}).get('finish_reason') for r in rec]}", flush=True)
        out.append({"name": sess["name"], "template": t, "flags": sess["flags"], "steps": rec})
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


def _stable_play(sess: dict, model: str, ports: Ports, check: bool) -> list[dict] | None:
    """The session's recorded steps, or None (reported) when a second oracle run answers differently."""
    first = play(sess, model, ports.next())
    problems = unstable(first, play(sess, model, ports.next())) if check else []
    for p in problems[:5]:
        print(f"UNSTABLE {sess['name']} (left out): {p[:300]}")
    return None if problems else first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--port-base", type=int, default=8231)
    ap.add_argument("--targets", action="store_true")
    ap.add_argument("--calls", action="store_true", help="the parsed tool-call sessions, into tool_call_answers.json")
    ap.add_argument("--formats", action="store_true",
                    help="the other JSON-native formats' sessions, into tool_call_formats.json")
    ap.add_argument("--tag-json", action="store_true",
                    help="the TAG_WITH_JSON sessions, into tool_call_tag_json.json")
    ap.add_argument("--thinking", action="store_true",
                    help="the sessions on templates that think, into tool_call_thinking.json")
    args = ap.parse_args()
    model = str(model_path("smollm2"))
    ports = Ports(args.port_base)
    if args.targets:
        record_targets(model, ports, args.only)
        return
    kind = ("thinking" if args.thinking else "tag_json" if args.tag_json else "formats" if args.formats
            else "calls" if args.calls else "")
    path = OUT / {"thinking": "tool_call_thinking.json", "tag_json": "tool_call_tag_json.json",
                  "formats": "tool_call_formats.json", "calls": "tool_call_answers.json", "": "tool_calls.json"}[kind]
    old = {s["name"]: s for s in json.loads(path.read_text())} if path.exists() else {}
    out = []
    for sess in {"thinking": thinking_sessions, "tag_json": tag_json_sessions, "formats": format_sessions,
                 "calls": call_sessions, "": sessions}[kind]():
        if args.only and sess["name"] not in args.only:
            if sess["name"] in old:
                out.append(old[sess["name"]])
            continue
        steps = _stable_play(sess, model, ports, not args.no_check)
        if steps is None:
            continue
        print(f"{sess['name']}: {len(steps)} requests, statuses {[s['answer']['status'] for s in steps]}",
              flush=True)
        out.append({"name": sess["name"], "flags": sess["flags"], "note": sess["note"], "steps": steps})
        OUT.mkdir(parents=True, exist_ok=True)   # after each session: a long run can be stopped and kept
        path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    if args.only:                                # the sessions kept from the old file after the last one played
        path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
