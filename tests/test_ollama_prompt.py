"""bankml.server.ollama.prompt: chatPrompt's walk (server/prompt.go:23, v0.13.3), the model's SYSTEM and MESSAGEs
(server/routes.go:2039, :425) and the runner's truncation (runner/ollamarunner/runner.go:131)."""

import pytest

from bankml.server.ollama import prompt as p
from bankml.server.ollama.catalog import OllamaModel


def _render(msgs):
    return "".join(f"<{m['role']}>{m['content']}" for m in msgs)


def _tok(s):
    return list(s)          # one token a character


def test_walk_keeps_what_fits_and_carries_system():
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "aaaaaaaaaa"},
            {"role": "assistant", "content": "bb"}, {"role": "user", "content": "cc"}]
    full = len(_render(msgs))
    kept, n = p.chat_prompt(msgs, _render, _tok, full, True)
    assert kept == msgs and n == 0
    # too small for the first user message: the system message is carried, the last two stay
    kept, _ = p.chat_prompt(msgs, _render, _tok, len(_render([msgs[0]] + msgs[2:])), True)
    assert kept == [msgs[0]] + msgs[2:]
    # nothing fits: the last message alone
    kept, _ = p.chat_prompt(msgs, _render, _tok, 1, True)
    assert kept == [msgs[0], msgs[3]]
    # truncate false: everything
    kept, _ = p.chat_prompt(msgs, _render, _tok, 1, False)
    assert kept == msgs


def test_images_become_tags():
    kept, n = p.chat_prompt([{"role": "user", "content": "x", "images": [b"1", b"2"]}], _render, _tok, 99, True)
    assert kept == [{"role": "user", "content": "[img-0][img-1]x"}] and n == 2


def test_model_system_and_messages():
    m = OllamaModel("a:latest", "a", "a.gguf", system="SYS", messages=[{"role": "user", "content": "u0"}])
    assert p.chat_messages(m, [{"role": "user", "content": "u"}]) == [
        {"role": "system", "content": "SYS"}, {"role": "user", "content": "u0"}, {"role": "user", "content": "u"}]
    assert p.chat_messages(m, [{"role": "system", "content": "s"}])[0] == {"role": "user", "content": "u0"}
    assert p.generate_messages(m, "", "hi", [], False) == [
        {"role": "system", "content": "SYS"}, {"role": "user", "content": "u0"}, {"role": "user", "content": "hi"}]
    assert p.generate_messages(m, "mine", "hi", [], True) == [
        {"role": "system", "content": "mine"}, {"role": "user", "content": "hi"}]


def test_runner_truncation():
    t = list(range(10))
    assert p.runner_truncate(t, 10, 4, True) == t
    assert p.runner_truncate(t, 6, 4, True) == [0, 1, 2, 3, 8, 9]
    assert p.runner_truncate(t, 6, -1, True) == [0, 1, 2, 3, 4, 9]
    with pytest.raises(p.PromptError) as e:
        p.runner_truncate(t, 6, 4, False)
    assert (e.value.status, e.value.message) == (400, "the input length exceeds the context length")
