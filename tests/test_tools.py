"""bankml.server.agent.tools' pieces (the tools themselves are replayed against llama-server's records in
tests/test_server_sessions.py, sessions tools_*)."""

from __future__ import annotations

import re

import pytest

from bankml.server.agent import tools
from bankml.server.flags import parse_flags


def test_glob_match_as_common_cpp():
    g = tools.glob_match
    assert g(b"*.py", b"c.py") and not g(b"*.py", b"sub/c.py") and g(b"**/*.py", b"sub/c.py")
    assert g(b"**", b"a/b/c") and g(b"[ab].md", b"b.md") and not g(b"[!ab].md", b"b.md")
    assert g(b"[a-c]x", b"bx") and g(b"[]]", b"]") and g(b"[x", b"[x") and not g(b"?", b"/")
    assert tools.path_glob_match("deep/*.txt", "sub/deep/d.txt") and tools.path_glob_match("c.*", "sub/c.py")


def test_std_regex_translation_and_errors():
    from bankml.cxx.ecma_regex import RegexError, translate
    assert translate(b"a**") == b"(?:\\x61*)*" and translate(b"[]") == b"(?!)"
    assert translate(b"e.t") == b"\\x65[^\\n\\r]\\x74" and translate(b"\\ca") is None
    for bad, text in ((b"*a", "Mismatched '(' and ')'"), (b"(?<=a)b", "zero-width assertion"),
                      (b"[b-a]", "Invalid range in bracket"), (b"a{3,1}", "Invalid range in '{}'")):
        with pytest.raises(RegexError, match=re.escape(text)):
            translate(bad)


def test_enabled_tools_keep_build_order():
    assert tools.enabled_tools(parse_flags(["--tools", "get_info,read_file"])) == ["read_file", "get_info"]
    assert tools.enabled_tools(parse_flags(["--tools", "all"])) == list(tools.NAMES)
    with pytest.raises(tools.ToolsSetupError, match='unknown tool "x". available tools: read_file, '):
        tools.check(["read_file", "x"])


def test_edit_file_fuzzy_keeps_untouched_lines(tmp_path):
    (tmp_path / "q.txt").write_bytes("say \u201chi\u201d  \nkeep\u00a0this  \n".encode())
    io = tools.HostIO(str(tmp_path))
    out = tools.t_edit_file({"path": "q.txt", "edits": [{"old_text": 'say "hi"', "new_text": "said"}]}, io)
    assert out == {"result": "file edited successfully", "path": "q.txt", "edits_applied": 1}
    assert (tmp_path / "q.txt").read_bytes() == "said\nkeep\u00a0this  \n".encode()
