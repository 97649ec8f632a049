"""bankml.chat.request: what the chat step hands on besides the prompt (its errors are in the oracle records)."""

from __future__ import annotations

import pytest

import _template_oracle as O
from bankml.cxx import nljson
from bankml.chat.errors import ChatRequestError
from bankml.chat.messages import parse_messages, parse_tools
from bankml.chat.request import ServerChatOptions, error_body, parse_chat_request
from bankml.chat.template import ChatTemplates

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def chatml():
    return ChatTemplates.from_source("chatml")


def test_body_fields_are_copied_through(chatml):
    req = parse_chat_request({"messages": HI, "temperature": 0.5, "n_predict": 7, "stop": "x"}, chatml)
    p = req.llama_params
    assert p["prompt"] == req.prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert p["stop"] == ["x"] and p["temperature"] == 0.5 and p["n_predict"] == 7
    assert p["chat_format"] == 2 and p["generation_prompt"] == "<|im_start|>assistant\n"
    assert req.chat.format == "peg-native" and req.chat.handler == "generic"
    assert "messages" in p                                      # every body key lands in the params


def test_logprobs_and_top_logprobs(chatml):
    assert parse_chat_request({"messages": HI, "logprobs": True}, chatml).llama_params["n_probs"] == 20
    assert parse_chat_request({"messages": HI, "logprobs": True, "top_logprobs": 3},
                              chatml).llama_params["n_probs"] == 3
    with pytest.raises(ChatRequestError, match="top_logprobs requires logprobs") as e:
        parse_chat_request({"messages": HI, "top_logprobs": 3}, chatml)
    assert e.value.status == 400


def test_response_format_becomes_the_json_schema(chatml):
    # Ling 3's handler builds no response-format grammar, so the schema is only passed on
    ling = ChatTemplates.from_source(O.sdist_templates()["inclusionai-ling-3.0-flash.jinja"])
    req = parse_chat_request({"messages": HI, "response_format": {"type": "json_object"}}, ling)
    assert req.json_schema == {"type": "object"}
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    req = parse_chat_request({"messages": HI, "response_format": {"type": "json_schema",
                                                                  "json_schema": {"schema": schema}}}, ling)
    assert req.json_schema == schema
    assert parse_chat_request({"messages": HI, "response_format": {"type": "text"}}, chatml).json_schema is None
    try:
        import bankml.grammar.json_schema  # noqa: F401
    except ImportError:
        # a generic template: llama-server converts the schema here; without the converter bankml refuses
        with pytest.raises(ChatRequestError, match="need bankml.grammar") as e:
            parse_chat_request({"messages": HI, "json_schema": schema}, chatml)
        assert e.value.status == 501
    with pytest.raises(ChatRequestError, match="Cannot use both json_schema and grammar") as e:
        parse_chat_request({"messages": HI, "json_schema": {}, "grammar": "root ::= x"}, chatml)
    assert e.value.status == 500


def test_additional_stops_are_appended():
    ling = ChatTemplates.from_source(O.sdist_templates()["inclusionai-ling-3.0-flash.jinja"])
    assert parse_chat_request({"messages": HI, "stop": ["a"]}, ling).llama_params["stop"] == ["a", "<|role_end|>"]
    assert parse_chat_request({"messages": HI}, ling).llama_params["stop"] == ["<|role_end|>"]
    with pytest.raises(ChatRequestError, match="cannot use push_back\\(\\) with number"):
        parse_chat_request({"messages": HI, "stop": 5}, ling)


def test_tools_are_rendered_and_flagged(chatml):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    req = parse_chat_request({"messages": HI, "tools": tools}, chatml)
    assert req.has_tools and req.llama_params["parse_tool_calls"] is True
    assert req.inputs.tools[0].name == "f" and req.inputs.tools[0].parameters == '{"type":"object"}'


def test_reasoning_budget_fields_for_thinking_templates():
    qwen = ChatTemplates.from_source(O.sdist_templates()["Qwen-Qwen3-0.6B.jinja"])
    p = parse_chat_request({"messages": HI, "reasoning_budget_tokens": 9}, qwen).llama_params
    assert p["reasoning_budget_tokens"] == 9
    assert p["reasoning_budget_start_tag"] == "<think>" and p["reasoning_budget_end_tags"] == ["</think>"]


def test_enable_thinking_kwarg(chatml):
    req = parse_chat_request({"messages": HI, "chat_template_kwargs": {"enable_thinking": True}}, chatml)
    assert req.inputs.enable_thinking is True
    assert req.inputs.chat_template_kwargs == {"enable_thinking": "true", "preserve_reasoning": "true"}
    req = parse_chat_request({"messages": HI, "reasoning_effort": "none"}, chatml,
                             ServerChatOptions(enable_thinking=True, chat_template_kwargs={}))
    assert req.inputs.enable_thinking is False


def test_media_needs_a_projector(chatml):
    body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
    with pytest.raises(ChatRequestError, match="image input is not supported") as e:
        parse_chat_request(body, chatml)
    assert e.value.status == 500
    with pytest.raises(ChatRequestError, match="media input is not supported by bankml") as e:
        parse_chat_request(body, chatml, ServerChatOptions(allow_image=True))
    assert e.value.status == 501


def test_message_and_tool_parsing_errors():
    with pytest.raises(ChatRequestError, match=r"Missing 'role' in message: \{\"content\":1.5,\"x\":\[\]\}"):
        parse_messages([{"content": 1.5, "x": []}])
    with pytest.raises(ChatRequestError, match=r"type must be string, but is null"):
        parse_messages([{"role": "user", "content": "x", "name": None}])
    with pytest.raises(ChatRequestError) as e:
        parse_tools([{"type": "function", "function": {"description": "d"}}])
    assert e.value.message == ("Failed to parse tools: [json.exception.out_of_range.403] key 'name' not found; "
                               "tools = [\n  {\n    \"type\": \"function\",\n    \"function\": {\n"
                               "      \"description\": \"d\"\n    }\n  }\n]")
    assert error_body(e.value) == {"error": {"code": 500, "message": e.value.message, "type": "server_error"}}


@pytest.mark.parametrize("value,text", [
    (1.0, "1.0"), (0.1, "0.1"), (1e15, "1e+15"), (123456789012345.0, "123456789012345.0"), (1e-4, "0.0001"),
    (1e-5, "1e-05"), (-0.0, "-0.0"), (1.5e300, "1.5e+300"), (2.5, "2.5"), (float("inf"), "null"),
], ids=str)
def test_nlohmann_float_layout(value, text):
    assert nljson.dump(value) == text


def test_nlohmann_dump_strings_and_nesting():
    assert nljson.dump({"a": [1, "x\n\u0001\"é"], "b": {}}) == '{"a":[1,"x\\n\\u0001\\"é"],"b":{}}'
    assert nljson.dump([[]], 2) == "[\n  []\n]"


def test_legacy_step_with_an_undetectable_template():
    # --no-jinja with a template that selects no built-in one: every chat request fails as llama-server's
    # common_chat_templates_apply_legacy does (a std::runtime_error: HTTP 500)
    tmpls = ChatTemplates.from_source("{% for m in messages %}{{ m.content }}{% endfor %}")
    assert parse_chat_request({"messages": HI}, tmpls).prompt == "hi"
    with pytest.raises(ChatRequestError, match="^this custom template is not supported, try using --jinja$") as e:
        parse_chat_request({"messages": HI}, tmpls, ServerChatOptions(use_jinja=False))
    assert e.value.status == 500


def test_legacy_step_params(chatml):
    opt = ServerChatOptions(use_jinja=False)
    req = parse_chat_request({"messages": HI, "grammar": "root ::= \"a\""}, chatml, opt)
    p = req.llama_params
    assert (req.chat.format, req.chat.handler, p["chat_format"], p["generation_prompt"]) == \
        ("content-only", "legacy", 0, "")
    assert (p["grammar"], p["grammar_type"]) == ("root ::= \"a\"", "tool_calls")
    assert "grammar_type" not in parse_chat_request({"messages": HI}, chatml, opt).llama_params
