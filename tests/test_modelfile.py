"""bankml.models.modelfile: Ollama's Modelfile reader and writer (parser/parser.go, v0.13.3), its cases after
parser/parser_test.go, rewritten."""

from __future__ import annotations

import codecs

import pytest

from bankml.models import modelfile as mf


def cmds(text):
    return [(c.name, c.args) for c in mf.parse(text).commands]


def err(text):
    with pytest.raises(mf.ModelfileError) as e:
        mf.parse(text)
    return str(e.value)


def test_commands_and_names():
    assert cmds("FROM model1\nADAPTER adapter1\nLICENSE MIT\nPARAMETER param1 value1\nTEMPLATE template1\n"
                "SYSTEM hi\nRENDERER r\nPARSER p\n") == [
        ("model", "model1"), ("adapter", "adapter1"), ("license", "MIT"), ("param1", "value1"),
        ("template", "template1"), ("system", "hi"), ("renderer", "r"), ("parser", "p")]
    assert cmds("from  x\nsYsTeM y") == [("model", "x"), ("system", "y")]     # any case; spaces trimmed


def test_values_keep_inner_spaces_and_trim_the_ends():
    assert cmds("FROM x\nSYSTEM   a  b\t c   \n") == [("model", "x"), ("system", "a  b\t c")]


def test_quotes_span_lines():
    assert cmds('FROM x\nSYSTEM """one\n"two"\nthree"""\n') == [("model", "x"), ("system", 'one\n"two"\nthree')]
    assert cmds('FROM x\nSYSTEM "a\nb"') == [("model", "x"), ("system", "a\nb")]
    assert cmds('FROM x\nSYSTEM ""') == [("model", "x"), ("system", "")]


def test_messages():
    assert cmds("FROM x\nMESSAGE user hello there\nMESSAGE assistant hi") == [
        ("model", "x"), ("message", "user: hello there"), ("message", "assistant: hi")]
    assert err("FROM x\nMESSAGE bob hi") == \
        '(line 2): message role must be one of "system", "user", or "assistant"'


def test_comments_and_blank_lines():
    assert cmds("# a comment\n\nFROM x # not a comment\n  # indented comment\n") == [("model", "x # not a comment")]


def test_errors():
    assert err("FROM x\nBADCMD y") == ('(line 2): command must be one of "from", "license", "template", "system", '
                                       '"adapter", "renderer", "parser", "parameter", or "message"')
    assert err("FROM x\nSYS-TEM y").startswith("(line 2): command must be one of")
    assert err("FROM") == "unexpected EOF"
    assert err("FROM x\nPARAMETER t\n") == "unexpected EOF: t"
    assert err("FROM x\nPARAMETER") == "unexpected EOF"
    assert err('FROM x\nSYSTEM """never closed\n') == "unexpected EOF"
    assert err('FROM "x') == "unexpected EOF"
    assert err("PARAMETER temperature 1") == "no FROM line"
    assert err("") == "no FROM line"


def test_byte_order_marks_and_multibyte():
    text = "FROM x\nSYSTEM 你好 👋\n"
    for data in (codecs.BOM_UTF8 + text.encode(), codecs.BOM_UTF16_LE + text.encode("utf-16-le"),
                 codecs.BOM_UTF16_BE + text.encode("utf-16-be"), text.encode()):
        assert cmds(data) == [("model", "x"), ("system", "你好 👋")]


def test_writer_round_trips():
    text = 'FROM x\nPARAMETER stop "<|a|> "\nSYSTEM """say "hi"\nnow"""\nMESSAGE user a\nLICENSE """l1\nl2"""\n'
    m = mf.parse(text)
    assert str(m) == 'FROM x\nPARAMETER stop "<|a|> "\nSYSTEM """say "hi"\nnow"""\nMESSAGE user a\nLICENSE "l1\nl2"\n'
    assert [(c.name, c.args) for c in mf.parse(str(m)).commands] == [(c.name, c.args) for c in m.commands]


def test_create_request(tmp_path):
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    m = mf.parse("FROM ./w.gguf\nPARAMETER temperature 0.7\nPARAMETER num_ctx 2048\nPARAMETER stop a\n"
                 "PARAMETER stop b\nPARAMETER use_mmap true\nMESSAGE user q\nLICENSE one\nLICENSE two\nSYSTEM s\n")
    req = mf.create_request(m, str(tmp_path))
    assert req == {"files": {str(tmp_path / "w.gguf"): None}, "system": "s",
                   "parameters": {"temperature": 0.7, "num_ctx": 2048, "stop": ["a", "b"], "use_mmap": True},
                   "messages": [{"role": "user", "content": "q"}], "license": ["one", "two"]}
    assert mf.create_request(mf.parse("FROM library/smollm2"), str(tmp_path)) == {"from": "library/smollm2"}
    warned = []
    assert mf.create_request(mf.parse("FROM x\nPARAMETER mirostat 1"), ".", warn=warned.append) == {"from": "x"}
    assert warned == ["warning: parameter mirostat is deprecated"]


def test_parameter_types():
    for key, value, message in (("nope", "1", "unknown parameter 'nope'"),
                                ("num_ctx", "1.5", "invalid int value [1.5]"),
                                ("top_p", "high", "invalid float value [high]"),
                                ("top_p", "1e39", "invalid float value [1e39]"),
                                ("use_mmap", "yes", "invalid bool value [yes]")):
        with pytest.raises(mf.ModelfileError) as e:
            mf.format_param(key, value)
        assert str(e.value) == message
    assert mf.format_param("top_p", "0x1p-2") == 0.25 and mf.format_param("seed", "-3") == -3
