"""bankml.jinja: the pieces the oracle records do not pin down on their own (its behaviour is replayed in
test_template.py through the engine-probe, broken-templates and quirk-templates records)."""

from __future__ import annotations

import functools
import random

import pytest

from bankml.jinja import Program, TemplateCrash, TemplateRuntimeError, TemplateSyntaxError
from bankml.jinja.lexer import tokenize
from bankml.jinja.values import JStr, VInt, VStr, cpp_sort


def render(src: str, **variables) -> str:
    return Program.parse(src).render(variables).decode()


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 31, 32, 33, 512, 513])
def test_cpp_sort_sorts(n):
    rng = random.Random(n)
    xs = [rng.randint(0, 20) for _ in range(n)]
    assert cpp_sort(xs, lambda a, b: a < b) == sorted(xs)


def test_cpp_sort_is_stable_only_up_to_16_items():
    # std::sort runs a plain insertion sort on short ranges: equal keys keep their order there
    items = [(k % 3, i) for i, k in enumerate(range(16))]
    assert cpp_sort(items, lambda a, b: a[0] < b[0]) == sorted(items, key=lambda t: t[0])
    rng = random.Random(7)
    big = [(rng.randint(0, 3), i) for i in range(200)]
    out = cpp_sort(big, lambda a, b: a[0] < b[0])
    assert [k for k, _ in out] == sorted(k for k, _ in big)
    assert out != sorted(big, key=lambda t: t[0])               # introsort moves equal keys around


def test_string_parts_survive_concatenation():
    s = VStr(JStr((b"ab", b"cd")))
    assert s.s.capitalize().str() == b"AbCd" and s.s.title().str() == b"AbCd"
    assert JStr((b"  a", b"b  ")).strip(True, True).parts == (b"a", b"b")
    assert render("{{ (x ~ y) | capitalize }}", x="hello", y="world") == "HelloWorld"


def test_lexer_positions_and_whitespace():
    tokens, src = tokenize(b"a\r\n  {% if x -%}\n b {%- endif %}\n")
    assert src == b"a\n  {% if x -%}\n b {%- endif %}"
    assert [(t.type, t.value) for t in tokens][:2] == [("text", b"a\n"), ("open_statement", b"{%")]
    assert tokens[1].pos == 4


def test_syntax_error_message_points_at_the_token():
    with pytest.raises(TemplateSyntaxError) as e:
        Program.parse("{{ x }}\n{% for %}")
    assert e.value.text.startswith("parser: Parser Error: ") or "Unexpected token" in e.value.text


def test_runtime_error_frames_name_the_innermost_statement():
    with pytest.raises(TemplateRuntimeError) as e:
        render("ok\n{% if true %}\n  {{ 1 + none }}\n{% endif %}")
    text = e.value.text
    assert text.startswith("\n------------\nWhile executing BinaryExpression at line 3, column 8 in source:\n")
    assert text.endswith("Error: Cannot perform operation on null values")


def test_deep_recursion_is_refused_not_crashed():
    src = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
    with pytest.raises(TemplateCrash, match="recursion"):
        render(src)


def test_division_by_zero_in_a_test_is_refused():
    with pytest.raises(TemplateCrash, match="division by zero"):
        render("{{ 4 is divisibleby(0) }}")


def test_caps_probe():
    string_only = Program.parse("{% for m in messages %}{{ m.role }}{{ m.content }}{% endfor %}").caps()
    assert string_only.supports_string_content and not string_only.supports_typed_content
    assert string_only.supports_system_role and not string_only.supports_tools
    typed = Program.parse("{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}")
    caps = typed.caps()
    assert caps.supports_typed_content and not caps.supports_string_content
    no_system = Program.parse("{% for m in messages %}{% if m.role != 'system' %}{{ m.content }}{% endif %}"
                              "{% endfor %}").caps()
    assert not no_system.supports_system_role


def test_values_are_objects_with_usage_marks():
    v = VInt(3)
    v.add_op("x")
    assert v.has_op("x") and not v.used
    assert functools.reduce(lambda a, b: a and b, [VInt(1).equivalent(VInt(1)), not VInt(1).equivalent(VStr(b"1"))])
