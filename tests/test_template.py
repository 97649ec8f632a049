"""bankml.chat.template against llama-server b11192: every recorded /apply-template answer, then the selection rules."""

from __future__ import annotations

import pytest

import _template_oracle as O
from bankml.models.gguf import read_header_file
from bankml.chat.errors import TemplateLoadError, TemplateNotReproduced
from bankml.chat.handlers import specialized_handler
from bankml.chat.messages import ChatInputs, ChatMessage, ToolCall
from bankml.chat.template import CHATML_TEMPLATE, ChatTemplates

RECORDS = [n for n in O.record_names()
           if n not in ("broken-templates", "quirk-templates", "schema-bodies", "gemma3-batch-cuts")]

try:
    import bankml.grammar.json_schema  # noqa: F401
    HAVE_CONVERTER = True
except ImportError:
    HAVE_CONVERTER = False


def _needs_converter(templates: ChatTemplates, body: dict) -> bool:
    # bodies whose answer depends on the JSON schema converter: refused (501) until bankml.grammar is there
    from bankml.chat.handlers import SCHEMA_GRAMMAR_HANDLERS as _SCHEMA_GRAMMAR_HANDLERS
    req = O.request(body)
    rf = req.get("response_format")
    has_schema = isinstance(req.get("json_schema"), dict) or (
        isinstance(rf, dict) and rf.get("type") in ("json_object", "json_schema"))
    handler = specialized_handler(templates.default.source)
    return has_schema and (handler is None or handler in _SCHEMA_GRAMMAR_HANDLERS) and not HAVE_CONVERTER


def _matches(templates, body, now, status, expected) -> bool:
    got = O.answer(templates, body, now)
    if _needs_converter(templates, body) and got != (status, expected):
        return got[0] == 501 and "need bankml.grammar" in got[1]["error"]["message"]
    return got == (status, expected)


@pytest.fixture(scope="module")
def headers(smollm2_path, gemma3_path):
    return {"smollm2": read_header_file(smollm2_path), "gemma3": read_header_file(gemma3_path)}


def _templates(rec: dict, headers) -> ChatTemplates:
    override = O.template_override(rec)
    t = ChatTemplates.from_gguf(headers[rec["model"]], override=override)
    t.startup_check()
    return t


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("name", RECORDS)
def test_oracle_record(name, headers):
    # every answer llama-server gave for this template: the prompt, or the error status and body
    rec = O.load_record(name)
    assert rec["startup"] == "ok"
    templates = _templates(rec, headers)
    bodies = {c["_id"]: c for c in rec["cases"]} if "cases" in rec else O.cases()
    mismatches = []
    for case_id, now, status, body in rec["results"]:
        if not _matches(templates, bodies[case_id], now, status, body):
            got = O.answer(templates, bodies[case_id], now)
            mismatches.append((case_id, bodies[case_id]["_kind"], (status, body), got))
    assert not mismatches, f"{len(mismatches)} of {len(rec['results'])} differ; first: {mismatches[:2]}"
    assert len(rec["results"]) >= 100 or name == "engine-probe"


@pytest.mark.oracle
@pytest.mark.slow
def test_oracle_broken_templates():
    # templates llama-server refuses at startup, with the text it logs
    rec = O.load_record("broken-templates")
    assert len(rec["templates"]) >= 25
    for entry in rec["templates"]:
        text = entry["template_text"]
        if entry["startup"] == "ok":
            ChatTemplates.from_source(text).startup_check()
            continue
        first = entry["errors"][0]
        with pytest.raises(TemplateLoadError) as exc:
            ChatTemplates.from_source(text).startup_check()
        init, verify = "common_chat_templates_init: error: ", "common_chat_verify_template: failed to apply template: "
        expected = first[len(init):] if first.startswith(init) else first[len(verify):]
        assert exc.value.message == expected, text


@pytest.mark.oracle
@pytest.mark.slow
def test_oracle_quirk_templates(headers):
    # whole-template whitespace rules (start and end of the source, CR/LF) on a few conversations
    rec = O.load_record("quirk-templates")
    bodies = {c["_id"]: c for c in rec["cases"]}
    for entry in rec["templates"]:
        assert entry["startup"] == "ok"
        t = ChatTemplates.from_gguf(headers["smollm2"], override=entry["template_text"])
        t.startup_check()
        for case_id, now, status, body in entry["results"]:
            assert O.answer(t, bodies[case_id], now) == (status, body), entry["template_text"]


def test_records_cover_every_sdist_template():
    # one record per template shipped in the reference sdist, plus the GGUF ones
    names = set(O.record_names())
    for tmpl in O.sdist_templates():
        assert "sdist-" + tmpl[:-len(".jinja")] in names
    assert {"gguf-smollm2", "gguf-gemma3", "named-chatml", "engine-probe", "broken-templates",
            "quirk-templates"} <= names


# -- template selection ----------------------------------------------------------------------------------------

class _Header:
    def __init__(self, **kv):
        self.kv = kv

    def get(self, key, default=None):
        return self.kv.get(key, default)

    def arch_key(self, suffix, default=None):
        return self.kv.get("llama." + suffix, default)


def _vocab(**extra):
    kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": ["<unk>", "<s>", "</s>", "hi"],
          "tokenizer.ggml.token_type": [2, 3, 3, 1], "tokenizer.ggml.bos_token_id": 1,
          "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.add_bos_token": False}
    kv.update(extra)
    return _Header(**kv)


def test_no_template_is_chatml():
    t = ChatTemplates.from_gguf(_vocab())
    assert t.source() == CHATML_TEMPLATE
    assert not t.has_explicit_template
    p = t.apply(ChatInputs(messages=[ChatMessage("user", "hi")]))
    assert p.prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_tool_use_variant_stands_in_for_a_missing_default():
    t = ChatTemplates.from_gguf(_vocab(**{"tokenizer.chat_template.tool_use": "TOOLS{{ bos_token }}"}))
    assert t.source() == "TOOLS{{ bos_token }}" and t.source("tool_use") == "TOOLS{{ bos_token }}"
    assert t.apply(ChatInputs(messages=[ChatMessage("user", "x")])).prompt == "TOOLS<s>"


def test_chatml_name_and_template_text_overrides():
    h = _vocab(**{"tokenizer.chat_template": "{{ 'model' }}"})
    assert ChatTemplates.from_gguf(h).apply(ChatInputs()).prompt == "model"
    assert ChatTemplates.from_gguf(h, override="chatml").source() == CHATML_TEMPLATE
    assert ChatTemplates.from_gguf(h, override="{{ eos_token }}!").apply(ChatInputs()).prompt == "</s>!"
    # with --jinja a template name other than chatml is template text: "llama3" renders as itself
    assert ChatTemplates.from_gguf(h, override="llama3").apply(ChatInputs()).prompt == "llama3"


def test_gguf_template_is_cut_at_nul_and_tekken_fallback():
    h = _vocab(**{"tokenizer.chat_template": "kept\0dropped"})
    assert ChatTemplates.from_gguf(h).source() == "kept"
    h = _vocab(**{"tokenizer.ggml.pre": "tekken", "llama.block_count": 40})
    assert ChatTemplates.from_gguf(h).source() == "mistral-v7-tekken"


def test_bos_and_eos_texts_are_stripped_when_the_vocab_adds_them():
    src = "{{ bos_token }}[{{ messages[0].content }}]{{ eos_token }}"
    t = ChatTemplates.from_source(src, "<s>", "</s>", add_bos=True, add_eos=True)
    assert t.apply(ChatInputs(messages=[ChatMessage("user", "x")])).prompt == "[x]"
    t = ChatTemplates.from_source(src, "<s>", "</s>")
    assert t.apply(ChatInputs(messages=[ChatMessage("user", "x")])).prompt == "<s>[x]</s>"


def test_source_patches_for_gpt_oss_and_mistral():
    gpt = ('<|channel|>{%- if "<|channel|>analysis<|message|>" in message.content or '
           '"<|channel|>final<|message|>" in message.content %}X{% endif %}')
    assert "{%- if false %}X" in ChatTemplates.from_source(gpt).source()


def test_syntax_errors_refuse_to_load():
    with pytest.raises(TemplateLoadError, match=r"parser: Parser Error: Expected %\} \(Got x\)"):
        ChatTemplates.from_source("{% if a x %}{% endif %}")
    with pytest.raises(TemplateLoadError, match="Unknown statement: include"):
        ChatTemplates.from_source("{% include 'x' %}")
    with pytest.raises(TemplateLoadError, match="lexer: unknown escape character"):
        ChatTemplates.from_source("{{ '\\q' }}")


def test_startup_renders_failing_refuse_to_load():
    t = ChatTemplates.from_source("{{ raise_exception('nope') }}")
    with pytest.raises(TemplateLoadError, match="Jinja Exception: nope"):
        t.startup_check()


def test_invalid_tool_arguments_are_refused_not_guessed():
    src = "{% for m in messages %}{{ m.tool_calls[0].function.arguments.arg if m.tool_calls }}{% endfor %}"
    t = ChatTemplates.from_source(src)
    assert t.default.caps.supports_object_arguments
    msg = ChatMessage("assistant", tool_calls=[ToolCall("f", "{not json")])
    with pytest.raises(TemplateNotReproduced, match="tool call arguments"):
        t.apply(ChatInputs(messages=[ChatMessage("user", "q"), msg, ChatMessage("user", "r")]))


def test_family_handlers_are_picked_from_the_source():
    names = {n: specialized_handler(s) for n, s in O.sdist_templates().items()}
    assert names["openai-gpt-oss-120b.jinja"] == "gpt-oss"
    assert names["Qwen3-Coder.jinja"] == "qwen3-coder"
    assert names["google-gemma-4-31B-it.jinja"] == "gemma4"
    assert names["Qwen-Qwen2.5-7B-Instruct.jinja"] is None
    assert sum(1 for v in names.values() if v) >= 15


def test_additional_stops_from_handlers():
    ling = O.sdist_templates()["inclusionai-ling-3.0-flash.jinja"]
    p = ChatTemplates.from_source(ling).apply(ChatInputs(messages=[ChatMessage("user", "x")]))
    assert p.additional_stops == ["<|role_end|>"] and p.handler == "ling-3"
    laguna = O.sdist_templates()["poolside-Laguna-XS.2.jinja"]
    p = ChatTemplates.from_source(laguna).apply(ChatInputs(messages=[ChatMessage("user", "x")]))
    assert p.additional_stops == ["</assistant>"] and p.handler == "generic"


@pytest.mark.oracle
@pytest.mark.slow
def test_oracle_schema_bodies(headers):
    # json_schema / response_format: llama-server converts the schema while building the prompt
    rec = O.load_record("schema-bodies")
    bodies = {c["_id"]: c for c in rec["cases"]}
    refused = 0
    for entry in rec["templates"]:
        text = O.sdist_templates()[entry["template"]]
        t = ChatTemplates.from_gguf(headers["smollm2"], override=text)
        for case_id, now, status, body in entry["results"]:
            assert _matches(t, bodies[case_id], now, status, body), (entry["template"], case_id)
            refused += _needs_converter(t, bodies[case_id])
    assert HAVE_CONVERTER or refused == 25          # 5 schema bodies x 5 templates that convert schemas


@pytest.mark.oracle
@pytest.mark.slow
def test_oracle_gemma3_batch_cuts_at_user_delimiters(headers):
    # Gemma 3 has sliding-window attention, so llama-server cuts prompt batches where a user message starts, found
    # with the chat step's message delimiters: the recorded prompt_progress shows those cuts
    rec = O.load_record("gemma3-batch-cuts")
    t = ChatTemplates.from_gguf(headers["gemma3"])
    for entry in rec["entries"]:
        params = t.apply(ChatInputs(messages=[ChatMessage(m["role"], m["content"]) for m in entry["messages"]],
                                    enable_thinking=False))
        assert params.prompt == entry["prompt"]
        user = [d for role, d in params.message_delimiters if role == "user"]
        assert user == ["<|im_start|>user"]
        tokens_at = dict(entry["marker_tokens"])
        starts, i = set(), params.prompt.find(user[0])
        while i >= 0:
            starts.add(tokens_at[i])
            i = params.prompt.find(user[0], i + 1)
        n = entry["n_prompt"]
        cuts = set(entry["processed"]) - {0, n, n - 4, n - 4 - 512}
        assert cuts == starts
