"""bankml.server.generation and bankml.server.slots: the loop's rules (stop strings, UTF-8 hold-back, limits, the
prompt cache rule), slot choice and the RAM prompt cache. The loop runs on the SmolLM2 model with an argmax
sampler standing in for bankml.sampling (temperature 0 draws the argmax), so the rules are tested on real tokens."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from bankml.server.generation import CompletionTask, Error, Final, Token, find_partial_stop, validate_utf8
from bankml.server.slots import PromptCache, Slot, common_prefix


def test_validate_utf8_cuts_an_incomplete_tail():
    assert validate_utf8(b"") == 0
    assert validate_utf8(b"ab") == 2
    assert validate_utf8("é".encode()[:1]) == 0
    assert validate_utf8(b"a" + "😀".encode()[:3]) == 1
    assert validate_utf8(b"a" + "😀".encode()) == 5
    assert validate_utf8(b"a" + "€".encode()[:2]) == 1


def test_partial_stop():
    assert find_partial_stop(b"Hello wo", b"world") == 6
    assert find_partial_stop(b"Hello", b"world") == -1
    assert find_partial_stop(b"Hello w", b"w") == 6
    assert find_partial_stop(b"", b"x") == -1


def test_common_prefix():
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2]) == 2


class _FakeCache:
    def __init__(self):
        self.n = 0
        self.saved = None

    def save(self):
        return b"x" * self.n

    def restore(self, state):
        self.n = len(state)

    def clear(self):
        self.n = 0

    def truncate(self, n):
        self.n = min(self.n, n)


def _slot(tokens):
    s = Slot(0, _FakeCache(), 4096, list(tokens))
    s.cache.n = len(tokens)
    s.cache_row_bytes = 1
    return s


def test_prompt_cache_saves_loads_and_moves_entries():
    pc = PromptCache(8192, 4096)
    s = _slot([1, 2, 3, 4])
    assert pc.save(s) and len(pc.states) == 1
    assert not pc.save(s)                         # already held as a prefix
    s2 = _slot([1, 2, 3, 4, 5, 6])
    assert pc.save(s2) and len(pc.states) == 1    # the shorter entry was a prefix of the new one: dropped
    empty = _slot([])
    pc.load(empty, [1, 2, 3, 4, 5, 6, 7])
    assert empty.tokens == [1, 2, 3, 4, 5, 6] and not pc.states    # moved, not copied


def test_prompt_cache_skips_entries_that_keep_little():
    pc = PromptCache(8192, 4096)
    pc.save(_slot(list(range(100))))
    s = _slot([])
    pc.load(s, [0, 1, 2, 99, 98])                 # lcp 3 of 100 < 0.25
    assert s.tokens == [] and len(pc.states) == 1


def test_prompt_cache_limits():
    pc = PromptCache(0, 10)                       # 0 MiB here means "no byte limit" once converted
    pc.limit_size = 2 * (24 + 8 + 2 * 13)          # two entries of 2 tokens (1-byte rows, no layers)
    assert not pc.save(_slot(list(range(60))))    # larger than the whole cache
    pc.save(_slot([1, 2]))
    pc.save(_slot([3, 4]))
    pc.save(_slot([5, 6]))                         # a third does not fit: the oldest goes
    assert [e.tokens for e in pc.states] == [[3, 4], [5, 6]]


# --- the loop on the model ------------------------------------------------------------------------------------

class _Argmax:
    def begin(self, tokens):
        self.prompt = list(tokens)

    def sample(self, logits):
        return int(np.argmax(logits))

    def accept(self, t):
        pass


def _params(**kw):
    d = dict(n_predict=16, stop=[], stream=False, return_tokens=True, n_probs=0, cache_prompt=True, id_slot=-1,
             return_progress=False, timings_per_token=False, post_sampling_probs=False, preserved_tokens=set())
    d.update(kw)
    return SimpleNamespace(**d)


@pytest.fixture(scope="module")
def ctx(smollm2_path):
    from bankml.server.context import ServerContext
    from bankml.server.flags import parse_flags
    c = ServerContext.load(parse_flags(["-m", str(smollm2_path), "-c", "256", "-np", "1"]))
    c.start()
    yield c
    c.close()


PROMPT = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n"


def _run(ctx, tokens, **kw):
    events, done = [], threading.Event()

    def emit(ev):
        events.append(ev)
        if isinstance(ev, (Final, Error)):
            done.set()
    ctx.worker.submit_completion(CompletionTask(list(tokens), _params(**kw), _Argmax, emit))
    assert done.wait(60)
    return events


@pytest.mark.slow
def test_greedy_answer_then_the_cache_rule(ctx):
    toks = ctx.tokenizer.tokenize(PROMPT, True, True)
    f = _run(ctx, toks, cache_prompt=False)[-1]
    assert f.content == b"The capital of France is Paris." and f.stop == "eos"
    assert f.tokens[-1] in ctx.tokenizer.eog_ids and f.n_decoded == len(f.tokens)
    assert f.n_tokens_cached == len(toks) + f.n_decoded - 1          # the last sampled token is not decoded
    again = _run(ctx, toks)[-1]
    assert (again.stats["cache_n"], again.stats["prompt_n"]) == (len(toks) - 1, 1)   # recompute the last token
    assert again.tokens == f.tokens
    fresh = _run(ctx, toks, cache_prompt=False)[-1]
    assert (fresh.stats["cache_n"], fresh.stats["prompt_n"]) == (0, len(toks))


@pytest.mark.slow
def test_stop_strings_are_held_and_cut(ctx):
    toks = ctx.tokenizer.tokenize(PROMPT, True, True)
    evs = _run(ctx, toks, stop=[" Paris"], stream=True)
    sent = b"".join(e.text for e in evs if isinstance(e, Token))
    assert sent == b"The capital of France is" and evs[-1].stop == "word" and evs[-1].stopping_word == " Paris"
    f = _run(ctx, toks, stop=["France is Par"])[-1]
    assert f.content == b"The capital of " and f.stop == "word"


@pytest.mark.slow
def test_n_predict_and_context_limits(ctx):
    toks = ctx.tokenizer.tokenize(PROMPT, True, True)
    f = _run(ctx, toks, n_predict=0)[-1]
    assert f.n_decoded == 1 and f.stop == "limit"                   # 0 still yields one token
    f = _run(ctx, toks, n_predict=3)[-1]
    assert f.n_decoded == 3 and f.stop == "limit" and not f.truncated
    long = ctx.tokenizer.tokenize("word " * 250, True, True)[:250]
    f = _run(ctx, long, n_predict=50)[-1]
    assert f.truncated and f.stop == "limit" and f.n_decoded == 256 - 250
    err = _run(ctx, ctx.tokenizer.tokenize("word " * 300, True, True))[-1]
    assert isinstance(err, Error) and err.status == 400 and err.type == "exceed_context_size_error"
    assert err.extra == {"n_prompt_tokens": 301, "n_ctx": 256}
    empty = _run(ctx, [])[-1]
    assert empty.stop == "none" and empty.n_decoded == 0
    bad = _run(ctx, [1, 10 ** 6])[-1]
    assert isinstance(bad, Error) and bad.message == "Prompt contains invalid tokens"
