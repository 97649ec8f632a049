"""Grammar cost per generated token (pytest-benchmark; run with `pytest tests/bench --benchmark-only`).

The decode step of SmolLM2-135M Q4_1 on this machine is ~8 ms, so the target is < 0.4 ms of grammar work per
token (5 %). A token costs: the check of the drawn token (`allowed`), `accept`, and on a rejection the mask
applied to the whole vocabulary (`apply` on 49152 candidates). Groups:
  grammar-token   check + accept along a JSON answer (warm engine: the states were seen before)
  grammar-cold    the same on a freshly compiled engine (every state's work done for the first time)
  grammar-worst   a fresh engine and every draw rejected: check + apply over the whole vocabulary + accept
  grammar-reject  apply over the whole vocabulary in a state whose mask is cached / not cached

The timer is the process's CPU time: the machine is shared, and wall time counts the waits for a core.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from bankml.grammar import Grammar, GrammarVocab, chat

ANSWER = ('```json\n{\n    "name": "Aurora Blake",\n    "age": 34,\n    "email": "aurora@example.com",\n'
          '    "tags": ["pilot", "écrivaine", "日本"],\n    "score": 12.5\n}\n```')
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                           "email": {"type": "string"}, "tags": {"type": "array",
                                                                                 "items": {"type": "string"}},
                                           "score": {"type": "number"}}, "required": ["name", "age"]}
GP = "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def vocab(smollm2_path):
    return GrammarVocab.from_gguf_file(smollm2_path)


@pytest.fixture(scope="module")
def setup(vocab):
    fmt = chat.response_format(SCHEMA, GP)
    g = Grammar.parse(fmt.grammar, vocab=vocab)
    for t in (1, 520, 9531, 198):  # <|im_start|> ass istant \n
        g.accept(t)
    # a token path through the answer: the longest allowed piece that starts the rest of the text
    text, path, probe = ANSWER.encode(), [], g.clone()
    by_len = sorted(range(vocab.n_vocab), key=lambda t: -len(vocab.pieces[t]))
    while text:
        m = probe.mask()
        tok = next(t for t in by_len if m[t] and vocab.pieces[t] and text.startswith(vocab.pieces[t]))
        path.append(tok)
        probe.accept(tok)
        text = text[len(vocab.pieces[tok]):]
    return fmt, g, path


def _walk(g: Grammar, path):
    h = g.clone()
    for t in path:
        h.allowed(t)
        h.accept(t)


@pytest.mark.slow
@pytest.mark.benchmark(group="grammar-token", timer=time.process_time)
def test_bench_check_and_accept_warm(benchmark, setup):
    fmt, g, path = setup
    _walk(g, path)  # warm the engine
    benchmark(_walk, g, path)
    benchmark.extra_info["tokens"] = len(path)
    benchmark.extra_info["ms_per_token"] = benchmark.stats.stats.mean * 1e3 / len(path)


@pytest.mark.slow
@pytest.mark.benchmark(group="grammar-cold", timer=time.process_time)
def test_bench_check_and_accept_cold(benchmark, setup, vocab):
    fmt, _, path = setup

    def fresh_walk():
        from bankml.grammar.grammar import compile_rules
        from bankml.grammar import gbnf
        eng = compile_rules(gbnf.parse(fmt.grammar), "root", vocab)
        g = Grammar(eng, vocab)
        for t in (1, 520, 9531, 198):
            g.accept(t)
        _walk(g, path)

    benchmark.pedantic(fresh_walk, rounds=5, iterations=1)
    benchmark.extra_info["tokens"] = len(path)
    benchmark.extra_info["ms_per_token"] = benchmark.stats.stats.mean * 1e3 / len(path)


@pytest.mark.slow
@pytest.mark.benchmark(group="grammar-reject", timer=time.process_time)
def test_bench_apply_full_vocab_cached(benchmark, setup, vocab):
    _, g, path = setup
    h = g.clone()
    for t in path[:6]:
        h.accept(t)
    ids = np.arange(vocab.n_vocab, dtype=np.int32)
    logits = np.zeros(vocab.n_vocab, dtype=np.float32)
    h.apply(ids, logits)  # the mask is now cached
    benchmark(h.apply, ids, logits)


@pytest.mark.slow
@pytest.mark.benchmark(group="grammar-reject", timer=time.process_time)
def test_bench_apply_full_vocab_uncached(benchmark, setup, vocab):
    fmt, _, path = setup
    from bankml.grammar import gbnf
    from bankml.grammar.grammar import compile_rules
    ids = np.arange(vocab.n_vocab, dtype=np.int32)

    def first_mask():
        eng = compile_rules(gbnf.parse(fmt.grammar), "root", vocab)
        g = Grammar(eng, vocab)
        for t in (1, 520, 9531, 198):
            g.accept(t)
        for t in path[:6]:
            g.accept(t)
        g.apply(ids, np.zeros(vocab.n_vocab, dtype=np.float32))

    benchmark.pedantic(first_mask, rounds=5, iterations=1)


@pytest.mark.slow
@pytest.mark.benchmark(group="grammar-worst", timer=time.process_time)
def test_bench_every_draw_rejected_cold(benchmark, setup, vocab):
    fmt, _, path = setup
    from bankml.grammar import gbnf
    from bankml.grammar.grammar import compile_rules
    ids = np.arange(vocab.n_vocab, dtype=np.int32)
    logits = np.zeros(vocab.n_vocab, dtype=np.float32)

    def run():
        eng = compile_rules(gbnf.parse(fmt.grammar), "root", vocab)
        g = Grammar(eng, vocab)
        for t in (1, 520, 9531, 198):
            g.accept(t)
        for t in path:
            g.allowed(t)
            g.apply(ids, logits)
            g.accept(t)

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info["tokens"] = len(path)
    benchmark.extra_info["ms_per_token"] = benchmark.stats.stats.mean * 1e3 / len(path)
