"""n > 1 choices (bankml.server.generation run_completion with children, completion_api.with_children): the
slot and ubatch rules on their own, the refusals, and the engine's own answers to n > 1 against the same requests
sent one choice at a time. (llama-server's answers are replayed from tests/oracle/server/sessions.json by
tests/test_server_sessions.py: sessions np2_n_choices and nchoices_*.)"""

from __future__ import annotations

import pytest

from bankml.server.engine_api import Engine, EngineError
from bankml.server.generation import free_slots, stream_runs


def test_stream_runs_pairs_neighbour_slots_only():
    # split_equal(sequential): consecutive sequence ids share a ubatch, the others decode alone
    assert stream_runs([0, 1]) == [True, True]
    assert stream_runs([0, 3]) == [False, False]
    assert stream_runs([0, 1, 3]) == [True, True, False]
    assert stream_runs([2]) == [False]
    assert stream_runs([0, 2, 3]) == [False, True, True]


class _S:
    def __init__(self, i, processing=False):
        self.id, self.processing = i, processing


class _Pool:
    def __init__(self, busy):
        self.slots = [_S(i, i in busy) for i in range(4)]


def test_free_slots_take_the_first_idle_ones_in_id_order():
    pool = _Pool(busy={1})
    parent = pool.slots[3]
    assert [s.id for s in free_slots(pool, 2, parent)] == [0, 2]
    assert [s.id for s in free_slots(pool, 1, pool.slots[0])] == [2]
    assert [s.id for s in free_slots(pool, 3, parent)] == [0, 2]     # not enough: llama-server defers


ARGS = ["-t", "2", "-c", "2048", "--jinja", "--reasoning", "off", "--no-webui"]
POEM = [{"role": "user", "content": "Write a short poem about rain."}]


@pytest.mark.slow
@pytest.mark.parametrize("argv,body,why", [
    (["-np", "-1"], {"messages": POEM, "n": 2}, "with a unified KV cache"),
    (["-np", "2", "-kvu"], {"messages": POEM, "n": 2}, "with a unified KV cache"),
    (["-np", "4"], {"prompt": ["Once", "Twice"], "n_cmpl": 2}, "for several prompts"),
])
def test_refused_with_the_reason(smollm2_path, argv, body, why):
    with Engine(["-m", str(smollm2_path)] + ARGS + argv) as eng:
        call = eng.chat if "messages" in body else eng.completion
        with pytest.raises(EngineError) as e:
            call(body)
    assert e.value.status == 501
    err = e.value.body["error"]
    assert err["type"] == "not_supported_error" and why in err["message"] and "n > 1" in err["message"]


@pytest.mark.slow
def test_choices_are_the_single_answers_with_seeds_plus_k(smollm2_path):
    body = {"messages": POEM, "temperature": 0.9, "max_tokens": 12, "logprobs": True, "top_logprobs": 2}
    with Engine(["-m", str(smollm2_path)] + ARGS + ["-np", "3"]) as eng:
        many = eng.chat(dict(body, n=3, seed=40))
        slots = eng.ctx.slots.slots
        parent = [s for s in slots if s.tokens]
        assert len(parent) == 1                     # the children's slots dropped their cells
        singles = [eng.chat(dict(body, seed=40 + k, cache_prompt=False)) for k in range(3)]
    assert [c["index"] for c in many["choices"]] == [0, 1, 2]
    for c, one in zip(many["choices"], singles):
        assert c["message"] == one["choices"][0]["message"]
        assert c["logprobs"] == one["choices"][0]["logprobs"]
    assert many["usage"]["completion_tokens"] == singles[0]["usage"]["completion_tokens"]


@pytest.mark.slow
def test_stream_alternates_choices_in_slot_order(smollm2_path):
    body = {"messages": POEM, "temperature": 0, "max_tokens": 5, "n": 2}
    with Engine(["-m", str(smollm2_path)] + ARGS + ["-np", "2"]) as eng:
        chunks = list(eng.chat_stream(body))
        whole = eng.chat(body)
    order = [ch["choices"][0]["index"] for ch in chunks if ch.get("choices")]
    # the parent takes the later slot (LRU ties), its child slot 0: the child's chunk comes first each step
    assert order[:4] == [1, 1, 0, 0]
    text = {0: "", 1: ""}
    for ch in chunks:
        for c in ch.get("choices", []):
            text[c["index"]] += c["delta"].get("content") or ""
    assert [text[0], text[1]] == [c["message"]["content"] for c in whole["choices"]]


@pytest.mark.slow
def test_f16_weights_refused(smollm2_f16_path):
    # llama-server's F16 products over several columns are not its one-column products (measured: the choices
    # differ from the first lockstep step on), and bankml decodes each choice alone
    with Engine(["-m", str(smollm2_f16_path)] + ARGS + ["-np", "2"]) as eng:
        assert eng.ctx.model.weight_types == {"F16"}
        with pytest.raises(EngineError) as e:
            eng.chat({"messages": POEM, "n": 2})
        one = eng.chat({"messages": POEM, "max_tokens": 2, "temperature": 0})     # n = 1 still answers
    assert e.value.status == 501 and "F16 weights" in e.value.body["error"]["message"]
    assert one["choices"][0]["finish_reason"] == "length"
