"""Tools in chat (POST /v1/chat/completions) as llama-server b11192 answers them (bankml.chat.tools).

- llama-server's recorded answers (tests/oracle/server/tool_calls.json, recorded by testing/record_tool_calls.py)
  replayed in order on a fresh bankml-serve per template: identical after tests/server_replay.normalize (the
  chatcmpl id; streams chunk by chunk; logprobs float for float).
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
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]


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
    # tool calls supported: only "none" is served
    hermes = src["NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"]
    assert _decide(hermes, "none") is None
    assert _decide(hermes, "required") == ("tool calls (tool_choice required) in the chat format the autoparser "
                                           "derives from this template (peg-native) are not reproduced by bankml yet")
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


def test_targets_are_refused_by_name():
    """tool_call_targets.json (testing/record_tool_calls.py --targets): llama-server's tool-call answers, with the
    grammar, its triggers and the parsed calls, on templates that support tool calls. bankml does not reproduce
    them yet and must refuse each (501, naming the format), never answer differently."""
    from bankml.chat.request import ServerChatOptions, parse_chat_request
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
            assert why and why.endswith("are not reproduced by bankml yet"), (target["name"], why)
            calls += bool(step.get("choice", {}).get("message", {}).get("tool_calls"))
    assert calls > 0   # the records do hold parsed calls, the target of the next step
