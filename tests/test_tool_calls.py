"""Tools in chat (POST /v1/chat/completions) as llama-server b11192 answers them (bankml.chat.tools).

- llama-server's recorded answers (tests/oracle/server/tool_calls.json, recorded by testing/record_tool_calls.py)
  replayed in order on a fresh bankml-serve per template: identical after tests/server_replay.normalize (the
  chatcmpl id; streams chunk by chunk; logprobs float for float).
- The parsed tool calls of tool_call_answers.json (per-call markers) and tool_call_formats.json (the other
  JSON-native formats) replayed the same way (the calls' random ids blanked); the grammars of
  tool_call_targets.json.
- Which requests are served and which are refused (501 naming the format), template by template.
- The real `openai` client with tools against bankml-serve.
"""

from __future__ import annotations

import pytest

import server_replay as sr
from _template_oracle import sdist_templates
from bankml.chat.messages import ChatInputs, ChatMessage, parse_tools
from bankml.chat.template import ChatTemplates
from bankml.chat.tools import refusal

SESSIONS = sr.load("tool_calls.json")
CALL_SESSIONS = sr.load("tool_call_answers.json")
FORMAT_SESSIONS = sr.load("tool_call_formats.json")
TAG_JSON_SESSIONS = sr.load("tool_call_tag_json.json")
THINKING_SESSIONS = sr.load("tool_call_thinking.json")
TAG_JSON = ("meetkai-functionary-medium-v3.1.jinja", "Mistral-Small-3.2-24B-Instruct-2506.jinja",
            "upstage-Solar-Open-100B.jinja")
SERVED = TAG_JSON + ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja",
          "Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
          "meta-llama-Llama-3.2-3B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja",
          "mistralai-Mistral-Nemo-Instruct-2407.jinja", "fireworks-ai-llama-3-firefunction-v2.jinja",
          "unsloth-Apriel-1.5.jinja", "MiniMax-M1.jinja", "GigaChat3.1-10B-A1.8B.jinja", "Apertus-8B-Instruct.jinja")
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
# templates that think, served with the reasoning parser before the tool parser (tool_choice auto / required)
THINKING = ("Qwen-Qwen3-0.6B.jinja", "Qwen-QwQ-32B.jinja", "Bielik-11B-v3.0-Instruct.jinja", "Reka-Edge.jinja",
            "Apriel-1.6-15b-Thinker-fixed.jinja", "llama-cpp-deepseek-r1.jinja",
            "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-ai-DeepSeek-V3.1.jinja")


def test_enough_requests_recorded():
    steps = [s for sess in SESSIONS for s in sess["steps"]]
    assert len(steps) >= 120
    assert len(SESSIONS) >= 10
    assert sum("sse" in s["answer"] for s in steps) >= 20
    choices = {str(s["request"]["body"].get("tool_choice")) for s in steps if isinstance(s["request"].get("body"),
                                                                                          dict)}
    assert {"auto", "none", "required", "None"} <= choices
    assert any(isinstance(s["request"].get("body"), dict) and isinstance(s["request"]["body"].get("tool_choice"),
                                                                         dict) for s in steps)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_tool_call_session_replays_identically(session, smollm2_path):
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def _decide(template: bytes | None, tool_choice: str):
    t = ChatTemplates.create(override=template, bos_token="<|im_start|>", eos_token="<|im_end|>") if template \
        else ChatTemplates.create()
    inputs = ChatInputs(messages=[ChatMessage("user", "hi")], tools=parse_tools(TOOLS), tool_choice=tool_choice)
    return refusal(t.apply(inputs), inputs, t.caps())


def test_served_and_refused_by_template():
    src = sdist_templates()
    # no tool-call support: every tool_choice is a content answer (chat-diff-analyzer.cpp:261)
    for name in ("google-gemma-2-2b-it.jinja", "microsoft-Phi-3.5-mini-instruct.jinja"):
        for choice in ("auto", "none", "required"):
            assert _decide(src[name], choice) is None, (name, choice)
    # the JSON-native format with per-call markers: every tool_choice is served (parsed tool calls)
    for name in SERVED:
        for choice in ("auto", "none", "required"):
            assert _decide(src[name], choice) is None, (name, choice)
    # another format (JSON-native with the content wrapped: Command R+): only "none" is served, the 501 names
    # the format
    name = "CohereForAI-c4ai-command-r-plus-tool_use.jinja"
    assert _decide(src[name], "none") is None
    assert _decide(src[name], "required") == (
        "tool calls (tool_choice required) in the chat format the autoparser derives from this template "
        "(peg-native, JSON_NATIVE tool calls) are not reproduced by bankml yet")
    # a template that thinks, in a format bankml builds: tool calls after the reasoning parser are served (Qwen3,
    # DeepSeek V3.1); its content parser (tool_choice none) and a template without tool-call support that thinks
    # (SmolLM3) are refused, naming the reason
    for name in ("Qwen-Qwen3-0.6B.jinja", "deepseek-ai-DeepSeek-V3.1.jinja"):
        for choice in ("auto", "required"):
            assert _decide(src[name], choice) is None, (name, choice)
    assert _decide(src["Qwen-Qwen3-0.6B.jinja"], "none") == (
        "tool calls (tool_choice none) in a template that thinks (the autoparser's reasoning parser with the "
        "content parser) are not reproduced by bankml yet")
    assert _decide(src["HuggingFaceTB-SmolLM3-3B.jinja"], "auto") == (
        "tool calls (tool_choice auto) in a template that thinks (the autoparser's reasoning parser with the "
        "content parser, the template having no tool-call support) are not reproduced by bankml yet")
    assert _decide(src["GLM-4.6.jinja"], "auto") == (
        "tool calls (tool_choice auto) in a template that thinks (the autoparser's reasoning parser with "
        "TAG_WITH_TAGGED tool calls) are not reproduced by bankml yet")
    # a specialized handler is refused for any tool_choice, by name
    gpt_oss = src["openai-gpt-oss-120b.jinja"]
    assert _decide(gpt_oss, "none") == ("tool calls (tool_choice none) in the gpt-oss chat format are not "
                                        "reproduced by bankml yet")


@pytest.mark.slow
@pytest.mark.oracle
def test_openai_client_with_tools(smollm2_path):
    openai = pytest.importorskip("openai")
    flags = next(s for s in SESSIONS if s["name"] == "tools_smollm2")["flags"]
    with sr.BankmlServe(sr.server_argv(flags, str(smollm2_path))) as srv:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none")
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
        r = client.chat.completions.create(model="smollm2", messages=msgs, tools=tools, tool_choice="required",
                                           max_tokens=8, temperature=0)
        plain = client.chat.completions.create(model="smollm2", messages=msgs, max_tokens=8, temperature=0)
        # SmolLM2's template has no tool support: llama-server answers as it does without tools
        assert r.choices[0].message.content == plain.choices[0].message.content
        assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason == "length"
        streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model="smollm2", messages=msgs, tools=tools, max_tokens=8, temperature=0, stream=True) if c.choices)
        assert streamed == r.choices[0].message.content
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="smollm2", messages=msgs, tools=tools, max_tokens=8,
                                           logprobs=True, stream=True)
        assert "logprobs is not supported with tools + stream" in str(e.value)


def test_targets_are_served_or_refused_by_name():
    """tool_call_targets.json (testing/record_tool_calls.py --targets): llama-server's tool-call answers, with the
    grammar, its triggers and the parsed calls, on templates that support tool calls. The JSON-native format
    (Hermes 2 Pro, Qwen 2.5), the other JSON-native shapes (Llama 3.x, Mistral Nemo, Firefunction v2, Apriel
    1.5, MiniMax-M1, GigaChat 3.1, Apertus), TAG_WITH_JSON (Functionary v3.1, Mistral Small 3.2, Solar Open) and
    the templates that think (Qwen3, llama.cpp's DeepSeek R1: the reasoning rules in the "required" grammar)
    are served: the grammar is llama-server's text (but the number in the until-N rules' names, and on the
    templates that think the order of the rules), lazy under "auto" with its word triggers, or absent where the
    format has no marker;
    every other format is refused (501, naming the format), never answered differently."""
    import re
    from bankml.chat.request import ServerChatOptions, parse_chat_request
    from bankml.server.api.families.oai_chat import OAIChat
    targets = sr.load("tool_call_targets.json")
    src = sdist_templates()
    calls = 0
    for target in targets:
        t = ChatTemplates.create(override=src[target["template"]], bos_token="<|im_start|>",
                                 eos_token="<|im_end|>")
        for step in target["steps"]:
            if step["status"] != 200:
                continue
            req = parse_chat_request(step["request"]["body"], t, ServerChatOptions())
            why = refusal(req.chat, req.inputs, t.caps())
            if target["template"] not in SERVED + THINKING:
                assert why and why.endswith("are not reproduced by bankml yet"), (target["name"], why)
                continue
            assert why is None, (target["name"], why)
            tc = OAIChat._tool_calls(req, {})
            until = (lambda g: re.sub(r"until-[0-9]+", "until-N", g))
            if target["template"] in THINKING:   # two `until` automata (the reasoning's and the content's): their
                #                                  rules print in the order of their numbers, which differ
                until = (lambda g: sorted(re.sub(r"until-[0-9]+", "until-N", g).splitlines()))
            assert until(tc.grammar) == until(step["grammar"] or ""), target["name"]
            assert (tc.lazy, tc.triggers) == (step["grammar_lazy"], step["grammar_triggers"])
            calls += bool(step.get("choice", {}).get("message", {}).get("tool_calls"))
    assert calls > 0


def test_enough_tool_call_requests_recorded():
    steps = [s for sess in CALL_SESSIONS for s in sess["steps"]]
    assert len(steps) >= 30 and len(CALL_SESSIONS) >= 3
    assert sum("sse" in s["answer"] for s in steps) >= 10
    finals = [s["answer"]["json"]["choices"][0] for s in steps if isinstance(s["answer"].get("json"), dict)
              and s["answer"]["json"].get("choices")]
    assert sum(c["finish_reason"] == "tool_calls" for c in finals) >= 5
    assert any(len(c["message"].get("tool_calls", [])) >= 2 for c in finals)   # parallel calls
    events = [e["data"] for s in steps if "sse" in s["answer"] for e in s["answer"]["sse"]
              if isinstance(e, dict) and isinstance(e.get("data"), dict)]
    deltas = [d for d in events if d.get("choices") and "tool_calls" in d["choices"][0].get("delta", {})]
    assert any(d.get("choices") and d["choices"][0]["finish_reason"] == "tool_calls" for d in events)
    assert len(deltas) >= 10


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", CALL_SESSIONS, ids=[s["name"] for s in CALL_SESSIONS])
def test_parsed_tool_call_session_replays_identically(session, smollm2_path):
    """tool_call_answers.json (record_tool_calls.py --calls): llama-server's parsed tool calls, replayed on a
    fresh bankml-serve: identical but the calls' random ids."""
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def _byte_stream_deltas(tc, text: str) -> list[dict]:
    """The deltas a stream sends when the output grows one character at a time (parsed after each)."""
    from bankml.grammar import chat_tools
    from bankml.server.api.families.oai_chat import tool_diffs
    prev, out = chat_tools.ToolMessage(), []
    for i in range(1, len(text) + 1):
        m = tc.parse(text[:i], True)
        if m is None or m.empty():
            continue
        out += tool_diffs(prev, m)
        prev = m
    return out


def test_parse_and_stream_deltas():
    """The parser (lenient, as llama-server parses after every token) and the deltas a stream sends."""
    from bankml.chat.analysis import ToolFormat
    from bankml.chat.messages import Tool
    from bankml.grammar import chat_tools
    fmt = ToolFormat(mode="json_native", per_call_start="<tool_call>\n", per_call_end="</tool_call>",
                     name_field="name", args_field="arguments", parameter_order=["name", "arguments"])
    tools = [Tool("get_weather", "", '{"type": "object", "properties": {"city": {"type": "string"}}}')]
    tc = chat_tools.tool_calls(tools, fmt, "<|im_start|>assistant\n", "auto", True)
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Berlin"}}\n</tool_call>'
    m = tc.parse(text, False)
    assert m.content == "Sure.\n" and [(c.name, c.arguments) for c in m.tool_calls] == [
        ("get_weather", '{"city": "Berlin"}')]
    assert tc.parse("Hello <tool", True).content == "Hello "          # a marker begun at the end is held back
    assert tc.parse('<tool_call>\n{"name": "get_wea', True).empty()    # a name is whole or absent
    out = _byte_stream_deltas(tc, text)
    args = "".join(d["tool_calls"][0].get("function", {}).get("arguments", "") for d in out if "tool_calls" in d)
    assert args == '{"city": "Berlin"}'
    assert sum("name" in d["tool_calls"][0].get("function", {}) for d in out if "tool_calls" in d) == 1


def test_other_formats_recorded():
    """tool_call_formats.json covers the other JSON-native shapes, with parsed calls (streamed and not) and
    answers finished "tool_calls"; with tool_call_answers.json, 150+ tool-call requests in all."""
    steps = [s for sess in FORMAT_SESSIONS for s in sess["steps"]]
    assert len(FORMAT_SESSIONS) >= 7 and len(steps) >= 70
    assert len(steps) + sum(len(s["steps"]) for s in CALL_SESSIONS) >= 150
    finals = [s["answer"]["json"]["choices"][0] for s in steps if isinstance(s["answer"].get("json"), dict)
              and s["answer"]["json"].get("choices")]
    assert sum(bool(c["message"].get("tool_calls")) for c in finals) >= 10
    assert sum(c["finish_reason"] == "tool_calls" for c in finals) >= 5
    events = [e["data"] for s in steps if "sse" in s["answer"] for e in s["answer"]["sse"]
              if isinstance(e, dict) and isinstance(e.get("data"), dict)]
    assert sum(bool(d.get("choices")) and "tool_calls" in d["choices"][0].get("delta", {}) for d in events) >= 10


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", FORMAT_SESSIONS, ids=[s["name"] for s in FORMAT_SESSIONS])
def test_other_json_format_session_replays_identically(session, smollm2_path):
    """tool_call_formats.json (record_tool_calls.py --formats): llama-server's answers in the autoparser's other
    JSON-native shapes, replayed on a fresh bankml-serve: identical but the random ids of calls without one."""
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def test_parse_section_array_ids_and_name_as_key():
    """The shapes beyond per-call markers: a section marker around an array of calls with ids (Mistral Nemo),
    no marker and the OpenAI wrapper member (Llama 3.x), the function name as the key (Apertus)."""
    from bankml.chat.analysis import ToolFormat
    from bankml.chat.messages import Tool
    from bankml.grammar import chat_tools
    tools = [Tool("get_weather", "", '{"type": "object", "properties": {"city": {"type": "string"}}}')]
    nemo = ToolFormat(mode="json_native", section_start="[TOOL_CALLS]", name_field="name", args_field="arguments",
                      id_field="id", tools_array_wrapped=True, parameter_order=["name", "arguments", "id"])
    tc = chat_tools.tool_calls(tools, nemo, "[/INST]", "auto", True)
    assert tc.lazy and tc.triggers == [{"type": 1, "value": "[TOOL_CALLS]"}]
    m = tc.parse('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Rome"}, "id": "call00003"}, '
                 '{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": 7}]', False)
    assert [(c.name, c.arguments, c.id) for c in m.tool_calls] == [
        ("get_weather", '{"city": "Rome"}', "call00003"), ("get_weather", '{"city": "Oslo"}', "7")]
    llama = ToolFormat(mode="json_native", name_field="name", args_field="parameters",
                       parameter_order=["name", "parameters"], openai_wrapper_trigger=True)
    tc = chat_tools.tool_calls(tools, llama, "", "auto", False)
    assert (tc.grammar, tc.lazy, tc.triggers) == ("", False, [])      # no marker: no grammar under "auto"
    m = tc.parse('Sure {"type": "function", "name": "get_weather", "parameters": {"city": "Rome"}}', False)
    assert m.content == "Sure " and m.tool_calls[0].arguments == '{"city": "Rome"}'
    assert chat_tools.tool_calls(tools, llama, "", "required", False).triggers == []
    apertus = ToolFormat(mode="json_native", section_start="<|tools_prefix|>", section_end="<|tools_suffix|>",
                         fun_name_is_key=True, tools_array_wrapped=True)
    tc = chat_tools.tool_calls(tools, apertus, "", "auto", True)
    m = tc.parse('<|tools_prefix|>[{"get_weather": {"city": "Rome"}}]<|tools_suffix|>', False)
    assert [(c.name, c.arguments) for c in m.tool_calls] == [("get_weather", '{"city": "Rome"}')]


def test_tag_json_formats_recorded():
    """tool_call_tag_json.json (record_tool_calls.py --tag-json): every sdist template the autoparser analyses
    as TAG_WITH_JSON that does not think and has no specialized handler, 10+ requests each, streamed and not."""
    assert {s["flags"][s["flags"].index("--chat-template-file") + 1].removeprefix("$TEMPLATE:")
            for s in TAG_JSON_SESSIONS} == set(TAG_JSON)
    for sess in TAG_JSON_SESSIONS:
        assert len(sess["steps"]) >= 10 and sum("sse" in s["answer"] for s in sess["steps"]) >= 3, sess["name"]


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", TAG_JSON_SESSIONS, ids=[s["name"] for s in TAG_JSON_SESSIONS])
def test_tag_json_session_replays_identically(session, smollm2_path):
    """llama-server's answers in the autoparser's TAG_WITH_JSON format, replayed on a fresh bankml-serve:
    identical but the random ids of calls without one."""
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def test_tag_json_analysis_and_parse():
    """The TAG_WITH_JSON analysis of the three sdist templates bankml serves in it (the markers, the name's
    prefix and suffix, the call id's place), and the parse of a call in each (content, name, arguments, id),
    then the stream deltas of a text cut at every byte, and the 500 for a final text the parser rejects."""
    from bankml.chat.messages import Tool
    from bankml.grammar import chat_tools
    src = sdist_templates()

    def fmt(name):
        t = ChatTemplates.create(override=src[name], bos_token="<s>", eos_token="</s>")
        return t.tool_format(t.default)

    keys = ("mode", "section_start", "section_end", "per_call_start", "per_call_end", "name_prefix", "name_suffix",
            "close", "call_id_pos", "call_id_prefix", "call_id_suffix")
    seen = {n: tuple(getattr(fmt(n), k) for k in keys) for n in TAG_JSON}
    assert seen == {
        "meetkai-functionary-medium-v3.1.jinja": ("tag_with_json", "", "", "<function=", "</function>", "", ">", "",
                                                  "none", "", ""),
        "Mistral-Small-3.2-24B-Instruct-2506.jinja": ("tag_with_json", "", "", "[TOOL_CALLS]", "", "", "[ARGS]", "",
                                                      "between_func_and_args", "[CALL_ID]", "[ARGS]"),
        "upstage-Solar-Open-100B.jinja": ("tag_with_json", "<|tool_calls|>", "<|calls|>", "<|tool_call:begin|>",
                                          "<|tool_call:end|>", "call00001<|tool_call:name|>", "<|tool_call:args|>",
                                          "", "none", "", "")}
    tools = [Tool("get_weather", "", '{"type": "object", "properties": {"city": {"type": "string"}}}')]
    texts = {"meetkai-functionary-medium-v3.1.jinja":
             ('Sure. <function=get_weather>{"city": "Rome"}</function>', "Sure. ", ""),
             "Mistral-Small-3.2-24B-Instruct-2506.jinja":
             ('[TOOL_CALLS]get_weather[ARGS][CALL_ID]abc123def[ARGS]{"city": "Rome"}', "", "abc123def"),
             "upstage-Solar-Open-100B.jinja":
             ('<|content|>Hm<|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>get_weather'
              '<|tool_call:args|>{"city": "Rome"}<|tool_call:end|><|calls|>', "<|content|>Hm", "")}
    for name, (text, content, call_id) in texts.items():
        tc = chat_tools.tool_calls(tools, fmt(name), "", "auto", True)
        assert tc.lazy and tc.triggers == [{"type": 1, "value": fmt(name).section_start or fmt(name).per_call_start}]
        m = tc.parse(text, False)
        assert m.content == content and [(c.name, c.arguments, c.id) for c in m.tool_calls] == [
            ("get_weather", '{"city": "Rome"}', call_id)], name
        out = _byte_stream_deltas(tc, text)
        calls = [d["tool_calls"][0] for d in out if "tool_calls" in d]
        assert "".join(c.get("function", {}).get("arguments", "") for c in calls) == '{"city": "Rome"}', name
        # a call shows once its opener (prefix, name, suffix) is whole, never with a partial name (an id parsed
        # later sends the name again with it: compute_diffs)
        names = [c["function"]["name"] for c in calls if "name" in c.get("function", {})]
        assert names == ["get_weather"] * (2 if call_id else 1), name
    # a final text the parser rejects (a call to an unknown function) is llama-server's 500
    tc = chat_tools.tool_calls(tools, fmt("meetkai-functionary-medium-v3.1.jinja"), "", "auto", True)
    with pytest.raises(Exception, match="does not match the expected peg-native format"):
        tc.parse("Hi <function=nope>{}</function>", False)


def test_thinking_templates_recorded():
    """tool_call_thinking.json (record_tool_calls.py --thinking): templates that think, 30+ requests over 4+
    templates, tool_choice auto and required, streamed and not, with parsed reasoning beside parsed calls."""
    steps = [s for sess in THINKING_SESSIONS for s in sess["steps"]]
    assert {s["flags"][s["flags"].index("--chat-template-file") + 1].removeprefix("$TEMPLATE:")
            for s in THINKING_SESSIONS} == set(THINKING)
    assert len(steps) >= 30
    assert sum("sse" in s["answer"] for s in steps) >= 10
    assert {s["request"]["body"]["tool_choice"] for s in steps} == {"auto", "required"}
    finals = [s["answer"]["json"]["choices"][0]["message"] for s in steps
              if isinstance(s["answer"].get("json"), dict) and s["answer"]["json"].get("choices")]
    assert any(m.get("reasoning_content") and m.get("tool_calls") for m in finals)
    events = [e["data"] for s in steps if "sse" in s["answer"] for e in s["answer"]["sse"]
              if isinstance(e, dict) and isinstance(e.get("data"), dict)]
    deltas = [d["choices"][0]["delta"] for d in events if d.get("choices")]
    assert any("reasoning_content" in d for d in deltas) and any("tool_calls" in d for d in deltas)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", THINKING_SESSIONS, ids=[s["name"] for s in THINKING_SESSIONS])
def test_thinking_session_replays_identically(session, smollm2_path):
    """llama-server's tool calls on templates that think (the reasoning parser, thinking enabled per request, the
    reasoning budget sampler's gate on the lazy grammar), replayed on a fresh bankml-serve: identical but the
    calls' random ids."""
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def test_reasoning_parse_and_deltas():
    """The reasoning parser before the calls (Qwen3's markers, whitespace kept: "<think>\\n" / "\\n</think>\\n\\n"):
    the reasoning up to the end marker, the calls after it; an empty block (thinking off) gives no reasoning;
    reasoning_format "none" leaves the block in the content; the stream sends the reasoning's deltas first."""
    from bankml.chat.analysis import ToolFormat
    from bankml.chat.messages import Tool
    from bankml.grammar import chat_tools
    from bankml.server.api.families.oai_chat import _message_json
    fmt = ToolFormat(mode="json_native", per_call_start="<tool_call>\n", per_call_end="</tool_call>",
                     name_field="name", args_field="arguments", parameter_order=["name", "arguments"],
                     content_plain=True)
    tools = [Tool("get_weather", "", '{"type": "object", "properties": {"city": {"type": "string"}}}')]
    thinking = chat_tools.Thinking("<think>\n", "\n</think>\n\n")
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    tc = chat_tools.tool_calls(tools, fmt, "<|im_start|>assistant\n", "auto", True, thinking)
    text = "<think>\nNow Oslo.\n</think>\n\n" + call
    m = tc.parse(text, False)
    assert (m.reasoning_content, m.content) == ("Now Oslo.\n", "")
    assert [(c.name, c.arguments) for c in m.tool_calls] == [("get_weather", '{"city": "Oslo"}')]
    assert list(_message_json(m)) == ["role", "content", "reasoning_content", "tool_calls"]
    off = chat_tools.tool_calls(tools, fmt, "<|im_start|>assistant\n<think>\n\n</think>\n\n", "auto", True,
                                thinking)
    m = off.parse("Hi.\n" + call, False)
    assert (m.reasoning_content, m.content, len(m.tool_calls)) == ("", "Hi.\n", 1)
    none = chat_tools.tool_calls(tools, fmt, "<|im_start|>assistant\n", "auto", True,
                                 chat_tools.Thinking("<think>\n", "\n</think>\n\n", extract=False))
    m = none.parse(text, False)
    assert (m.reasoning_content, m.content) == ("", "<think>\nNow Oslo.\n</think>\n\n")
    out = _byte_stream_deltas(tc, text)
    assert "".join(d.get("reasoning_content", "") for d in out) == "Now Oslo.\n"
    first_call = next(i for i, d in enumerate(out) if "tool_calls" in d)
    assert all("tool_calls" not in d for d in out[:first_call]) and "reasoning_content" in out[0]
