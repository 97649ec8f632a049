"""Continuous batching (bankml.server.batching) against llama-server b11192 serving overlapping requests on two
slots: tests/oracle/server/batching.json, recorded by testing/record_batching.py, some of its schedules on the
qwen3 file (batching_qwen3.json: the qwen3 graph through Model.decode_batch), and Gemma 3's (batching_gemma3.json:
sliding-window layers, each slot's context checkpoints taken inside the batched steps; a schedule's `pre`
requests, a conversation's first turn, are answered one after the other before A).

Each schedule is replayed in-process on its recorded flags (-np 2 or 3, split cache or -kvu; -b 64 -ub 16 in three): A
streams; each later request is submitted when A has sampled as many tokens as llama-server's log says it had when
that request's prompt started, except one llama-server deferred (no idle slot), which is submitted with the one
before it and joins when a slot frees, by the rules alone. Every answer (content, token ids, each token's
probabilities as floats, stop type, counts) must equal llama-server's, and the point at which C joined must be the
recorded one. A second test compares each batched answer with the same request served alone, where the record
shows llama-server's are equal.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path

import pytest

from bankml.server.api import completion as api
from bankml.server.api.families import COMPLETION
from bankml.server.api.families.base import Reply
from bankml.server.engine_api import Engine
from bankml.server.generation import Error, Final, Token
from testing.record_batching import _plain_answer, _stream_answer

RECORD = Path(__file__).parent / "oracle" / "server" / "batching.json"
# some of the schedules on the qwen3 file (testing/record_batching.py --qwen3; the record pins its sha256)
RECORD_QWEN3 = RECORD.with_name("batching_qwen3.json")
# Gemma 3 270M (sliding-window layers: context checkpoints per slot; testing/record_batching.py --gemma3)
RECORD_GEMMA3 = RECORD.with_name("batching_gemma3.json")


def _record(path=RECORD):
    return json.loads(path.read_text())


# (record, schedule index) of every recorded schedule, the qwen3 file's after the llama ones
SCHEDULES = [(path, i) for path in (RECORD, RECORD_QWEN3, RECORD_GEMMA3)
             for i in range(len(_record(path)["schedules"]))]


def _sched_id(x):
    return x.stem.removeprefix("batching").lstrip("_") or "llama" if isinstance(x, Path) else str(x)


def _argv(flags, model):
    return [model if f == "$MODEL" else f for f in flags if f != "-v"]


class _Req:
    def __init__(self, ctx, body, on_event=None):
        self.prep = api.prepare(ctx, dict(body), COMPLETION)
        self.reply = Reply.start(COMPLETION, ctx, self.prep)
        self.events, self.done = [], threading.Event()

        def emit_for(i):
            def emit(ev):
                self.events.append(ev)
                if on_event is not None:
                    on_event(ev)
                if isinstance(ev, (Final, Error)):
                    self.done.set()
            return emit
        self.tasks = api.make_tasks(ctx, self.prep, emit_for)

    def submit(self, ctx):
        for t in api.parents(self.tasks, self.prep):
            ctx.worker.submit_completion(t)

    def answer(self, stream: bool) -> dict:
        assert self.done.wait(300)
        err = [e for e in self.events if isinstance(e, Error)]
        assert not err, err[0].json()
        if stream:
            chunks = [c for ev in self.events for c in self.reply.chunks(0, ev)]
            return _stream_answer([json.loads(json.dumps(c)) for c in chunks])
        final = next(e for e in self.events if isinstance(e, Final))
        return _plain_answer(json.loads(json.dumps(self.reply.merge([self.reply.final(0, final)]))))


class _Joins(logging.Handler):
    """bankml's batch composition log (-v): the steps' lines."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("batch: "):
            self.lines.append(msg)


_ENGINES: dict = {}


@pytest.fixture(scope="module")
def engines(smollm2_path, request):
    """One Engine per recorded flag set and file (-v dropped: the test turns the debug log on itself); a record
    naming the qwen3 file gets it (its sha256 checked)."""
    def get(flags, path=RECORD):
        model = smollm2_path
        if path == RECORD_GEMMA3:
            model = request.getfixturevalue("gemma3_path")
        if path == RECORD_QWEN3:
            from bankml.models.verify import sha256_file
            model = request.getfixturevalue("smollm2_qwen3_path")
            assert sha256_file(model) == _record(path)["sha256"], f"{model} is not the file of {path.name}"
        key = (str(model), tuple(flags))
        if key not in _ENGINES:
            _ENGINES[key] = Engine(_argv(flags, str(model)))
            assert _ENGINES[key].ctx.worker.batcher is not None
        return _ENGINES[key]
    yield get
    for eng in _ENGINES.values():
        eng.close()
    _ENGINES.clear()


def _play(eng, sched, joined):
    """The `pre` requests one after the other; then A first; each later request when A has sampled as many tokens
    as llama-server's log says it had when that request's prompt started, but a request llama-server deferred (no
    idle slot) right after the one before it (it then starts by the rules alone, when a slot frees). joined: the
    batch log's lines, emptied once the pre requests are answered."""
    ctx = eng.ctx
    reqs = sched["requests"]
    joins = sched["schedule"]
    got = {}
    for name in sched.get("pre", []):
        r = _Req(ctx, reqs[name])
        r.submit(ctx)
        got[name] = r.answer(False)
    joined.clear()
    a_task = str(joins[0]["task"])
    triggers = []                       # (A's n_gen, [names])
    for j in joins[1:]:
        if j["deferred"] and triggers:
            triggers[-1][1].append(j["request"])
        else:
            triggers.append((j["others_n_gen"][a_task], [j["request"]]))
    later = {}

    def on_a(ev):
        if not isinstance(ev, Token):
            return
        for n, names in triggers:
            if ev.n_decoded == n and names[0] not in later:
                for name in names:
                    later[name] = _Req(ctx, reqs[name])
                    later[name].submit(ctx)

    a = _Req(ctx, reqs["A"], on_a)
    a.submit(ctx)
    got["A"] = a.answer(True)
    for j in joins[1:]:
        got[j["request"]] = later[j["request"]].answer(False)
    return got


def _fresh(eng):
    """Each schedule starts from empty slots, as the recorder's fresh server does."""
    def clear():
        for s in eng.ctx.slots.slots:
            s.clear()
            s.t_last_used = -1
        if eng.ctx.slots.prompt_cache is not None:
            eng.ctx.slots.prompt_cache.states.clear()
    eng.ctx.worker.call(clear)


def _a_rows_before_prompt(lines: list[str], a_slot: int, slot: int, nth: int) -> int:
    """A's decode rows in the steps up to the one where the nth prompt on `slot` starts (A's sampled count then):
    a prompt starts at a step holding its slot's prompt rows that follows one without them."""
    n_a, seen, in_prompt = 0, 0, False
    step_of = {}
    for ln in lines:                    # one line per view; a step's views share its number
        m = re.match(r"batch: step (\d+), view \d+: (.*)", ln)
        step_of.setdefault(int(m.group(1)), []).append(m.group(2))
    for step in sorted(step_of):
        text = ", ".join(step_of[step])
        if f"slot {a_slot} 1 (decode)" in text:
            n_a += 1
        starts = re.search(rf"slot {slot} \d+ \(prompt\)", text) is not None
        if starts and not in_prompt:
            seen += 1
            if seen == nth:
                return n_a
        in_prompt = starts
    raise AssertionError(f"no prompt #{nth} on slot {slot} in the batch log")


@pytest.mark.parametrize("path,i", SCHEDULES, ids=_sched_id)
def test_overlapping_requests_are_llama_servers(engines, path, i):
    sched = _record(path)["schedules"][i]
    log = logging.getLogger("bankml.server")
    h = _Joins()
    old = log.level
    log.setLevel(logging.DEBUG)
    log.addHandler(h)
    try:
        eng = engines(sched["flags"], path)
        _fresh(eng)
        got = _play(eng, sched, h.lines)
    finally:
        log.removeHandler(h)
        log.setLevel(old)
    for name in sched["answers"]:
        assert got[name] == sched["answers"][name], f"{sched['name']} {name}"
    # the second and third requests started where llama-server's log says (A's sampled count at their steps)
    joins = sched["schedule"]
    a_slot, a_task = joins[0]["slot"], str(joins[0]["task"])
    for k, j in enumerate(joins[1:], 1):
        assert j["slot"] != a_slot
        nth = sum(1 for x in joins[1:k + 1] if x["slot"] == j["slot"])
        assert _a_rows_before_prompt(h.lines, a_slot, j["slot"], nth) == j["others_n_gen"][a_task], (k, j)
    assert any(j["deferred"] for j in joins) or len({j["slot"] for j in joins}) == 3


@pytest.mark.parametrize("path,i", [(p, i) for p, i in SCHEDULES if "alone" in _record(p)["schedules"][i]],
                         ids=_sched_id)
def test_each_request_alone_is_llama_servers(engines, path, i):
    """The same requests served one after another (cache_prompt false): llama-server's answers alone. Where the
    record's batched and alone answers are equal (every schedule whose cells stay under 512), batching changed no
    bit in llama-server, and the test above shows it changed none in bankml; `split_kv_np2` shows where it may."""
    sched = _record(path)["schedules"][i]
    eng = engines(sched["flags"], path)
    _fresh(eng)
    for name in sched["alone"]:
        body = dict(sched["requests"][name], stream=False, cache_prompt=False)
        r = _Req(eng.ctx, body)
        r.submit(eng.ctx)
        assert r.answer(False) == sched["alone"][name], f"{sched['name']} {name}"


LONG = {"prompt": "Once upon a time", "n_predict": 400, "temperature": 0, "ignore_eos": True}


def _wait_token(req, n: int, timeout: float = 120) -> None:
    import time
    t = time.time()
    while sum(isinstance(e, Token) for e in req.events) < n:
        assert time.time() - t < timeout and not req.done.is_set()
        time.sleep(0.01)


def test_cut_stream_frees_its_slot_while_another_generates(engines):
    eng = engines(_record()["schedules"][0]["flags"])
    ctx = eng.ctx
    _fresh(eng)
    a = _Req(ctx, dict(LONG, stream=True))
    a.submit(ctx)
    _wait_token(a, 2)
    b = _Req(ctx, dict(LONG, prompt="The sea is", stream=True))
    b.submit(ctx)
    _wait_token(b, 2)
    for t in b.tasks:
        t.cancelled.set()
    # the next step frees B's slot; A goes on generating
    busy = ctx.worker.call(lambda: [s.processing for s in ctx.slots.slots])
    assert busy.count(True) == 1
    assert not a.done.is_set()
    n_a = sum(isinstance(e, Token) for e in a.events)
    _wait_token(a, n_a + 3)
    for t in a.tasks:
        t.cancelled.set()
    assert ctx.worker.call(lambda: [s.processing for s in ctx.slots.slots]) == [False, False]


def test_slot_action_waits_for_its_busy_slot(engines):
    """Worker.call(wait_for=slot) (slot save / restore / erase) is deferred while the batcher has that slot at
    work, and runs at its release, as llama-server defers the task."""
    eng = engines(_record()["schedules"][0]["flags"])
    ctx = eng.ctx
    _fresh(eng)
    a = _Req(ctx, dict(LONG, n_predict=200))
    a.submit(ctx)
    slot = ctx.worker.call(lambda: next(s for s in ctx.slots.slots if s.processing))
    seen = ctx.worker.call(lambda: (slot.processing, a.done.is_set()), wait_for=slot)
    assert seen == (False, True)            # it ran once A's slot was released, after A's last event
