"""The generation loop: one completion task on one slot, as llama-server b11192's update_slots / process_token
run it (tools/server/server-context.cpp). The worker thread (bankml.server.worker) runs tasks in arrival order;
with several slots on a split KV cache it hands completions to bankml.server.batching instead, whose steps use
the per-task pieces here (launch_slots, prompt_start, sample_one, pre_decode, copy_to_children, _release).

    task = CompletionTask(tokens, params, make_sampler, emit)
    ctx.worker.submit_completion(task)           # emit(event) is called from the worker thread

Events (`emit`): Begin() when prompt processing starts (a stream's headers go out then), Progress(...) with
return_progress, Token(...) per processed token (what a stream chunk carries), Final(...) at the end, or
Error(status, message, type, **extra) instead (a bankml.server.http.Refusal). A task whose
`cancelled` flag is set (client gone) stops before its next decode and frees the slot; the KV it computed stays
cached. This module knows no response family: bankml.server.api.families turns the events into JSON.

Per task, in llama-server's order:
1. slot choice (bankml.server.slots, with the RAM prompt cache), then cache_idle_slots;
2. an empty prompt answers at once (stop_type none, zero timings); P >= n_ctx_slot is exceed_context_size_error;
3. n_past = LCP(slot tokens, prompt) (0 with cache_prompt false); a fully cached prompt recomputes its last token;
   the slot keeps its first n_past tokens; the rest is decoded in calls of at most n_batch tokens (the engine
   cuts each into ubatches of n_ubatch);
4. the sampler gets every prompt token (Sampler.begin), then per token: sample, accept, n_gen += 1, the piece
   (special tokens as text only when preserved), probabilities, process_token: UTF-8 hold-back (validate_utf8),
   stop strings (full match from max(0, |U| - |word| - |piece|), then partial match holds all unsent text
   unless the token is EOG), the context limit (slot tokens + 1 >= n_ctx: "limit", truncated; not with
   --context-shift), the n_predict budget (checked once n_gen > 0: n_predict 0 still yields one token), EOG
   ("eos");
5. with --context-shift, a slot whose tokens + 1 reach n_ctx is shifted first (pre_decode, `context_shift`): the
   n_discard tokens after the first n_keep leave the cache and the slot's tokens, truncated is set;
6. the next token is decoded at position len(slot tokens) and joins the slot's tokens.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from ..engine.model import KVCache, UnifiedSeq
from ..errors import ModelFileChanged
from . import energy
from .http import Refusal
from .slots import SlotStats, time_us

log = logging.getLogger("bankml.server")

STOP_NONE, STOP_EOS, STOP_WORD, STOP_LIMIT = "none", "eos", "word", "limit"


# ---------------------------------------------------------------------------------------------------------------
# events

@dataclass
class Begin:
    pass


@dataclass
class Progress:
    total: int
    cache: int
    processed: int
    time_ms: int
    stats: dict | None = None      # the slot's timings so far, with timings_per_token


@dataclass
class TokenProbs:
    """completion_token_output: the sampled token, its probability, the text sent for it, the top candidates."""
    tok: int
    prob: float
    text: bytes
    probs: list            # [(id, piece bytes, p)]


@dataclass
class Token:
    text: bytes            # text_to_send (b"" while held back)
    tok: int
    n_decoded: int
    n_prompt_tokens: int
    n_prompt_cached: int
    probs: TokenProbs | None
    stats: dict | None     # timings when the task stops on this token (or timings_per_token)
    stopped: bool


@dataclass
class Final:
    content: bytes
    tokens: list[int]
    id_slot: int
    n_decoded: int
    n_prompt_tokens: int
    n_prompt_cached: int
    n_tokens_cached: int
    truncated: bool
    stop: str
    stopping_word: str
    has_new_line: bool
    stats: dict
    probs: list            # [TokenProbs]
    prompt: bytes          # the prompt detokenized with specials


class Error(Refusal):
    """The task is refused: the event is the bankml.server.http.Refusal itself (status, message, type, extra)."""


# ---------------------------------------------------------------------------------------------------------------

@dataclass
class CompletionTask:
    tokens: list[int]
    params: object                      # bankml.sampling.Params
    sampler: object                     # () -> a bankml.sampling.Sampler (begin / sample / accept); may raise
    emit: object                        # callable(event)
    index: int = 0
    id: int = 0
    cancelled: threading.Event = field(default_factory=threading.Event)
    probs: object = None                # callable(task, logits, sampler, tok) -> TokenProbs (n_probs > 0)
    tokenizer: object = None
    children: list = field(default_factory=list)    # n_cmpl > 1: the child tasks (server_task::add_child)
    id_parent: int = -1
    n_ctx: int = 0                      # the context this task may fill (0: its slot's; Ollama's num_ctx)
    ctx_shift: bool | None = None       # shift the context when it fills (None: the server's --context-shift)
    spans: list = field(default_factory=list)   # message_spans: [(role, token position)] (message_spans())


def message_spans(tokenizer, delimiters, tokens: list[int]) -> list[tuple[str, int]]:
    """find_message_spans (common_chat_msg_delimiters::split, common/chat.cpp): the request's
    "message_delimiters" (the chat template's user / assistant starts; [{"role", "delimiter"}]) tokenized with
    specials parsed and no BOS; scanning the prompt, each position where a delimiter's tokens start (the first
    delimiter that matches) begins a span of that role. Only the start of each span is kept."""
    if not isinstance(delimiters, list):
        return []
    delims = []
    for d in delimiters:
        if not isinstance(d, dict):
            continue
        role = d.get("role", "")
        text = d.get("delimiter", "")
        role = role if isinstance(role, str) else ""
        text = text if isinstance(text, str) else ""
        toks = tokenizer.tokenize(text, False, True) if text else []
        delims.append((role if role in ("system", "user", "assistant", "tool") else "", list(toks)))
    if not delims:
        return []
    out = []
    n = len(tokens)
    for i in range(n):
        for role, toks in delims:
            if i + len(toks) > n:
                continue
            if tokens[i:i + len(toks)] == toks:
                out.append((role, i))
                break
    return out


@dataclass
class Checkpoint:
    """common_prompt_checkpoint: the sliding-window cache's cells of the slot's sequence (KVCache.swa_save(), or
    UnifiedSeq.swa_save() on a unified cache; LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) as they were before the batch
    that starts at n_tokens, with the cache's pos_min / pos_max then, and the task that made it."""
    id_task: int
    n_tokens: int
    pos_min: int
    pos_max: int
    data: tuple


def create_checkpoint(ctx, run: "_Run", n_tokens: int, pos_min: int, pos_max: int) -> None:
    """create_checkpoint (tools/server/server-context.cpp, b11192), before the batch of the slot's tokens from
    n_tokens on is decoded. When the list is one short of full or more, checkpoints of other tasks that lie within
    --checkpoint-min-step of the one before them go first; then the oldest go until there is room; one at the same
    n_tokens is replaced."""
    cps = run.slot.checkpoints
    n_max, min_step, id_task = ctx.cfg.n_ctx_checkpoints, ctx.cfg.checkpoint_min_step, run.task.id
    i, last = 0, -1
    while len(cps) + 1 >= n_max and i < len(cps):
        c = cps[i]
        if c.id_task != id_task and last >= 0 and c.n_tokens <= last + min_step:
            del cps[i]
            continue
        last = c.n_tokens
        i += 1
    while cps and len(cps) >= n_max:
        del cps[0]
    cps[:] = [c for c in cps if c.n_tokens != n_tokens]
    cps.append(Checkpoint(id_task, n_tokens, pos_min, pos_max, run.slot.cache.swa_save()))


def swa_reuse(ctx, run: "_Run", n_past: int, P: int) -> int:
    """The prompt-cache rule for a cache with sliding-window layers (server-context.cpp, b11192, after the common
    prefix is found): the smallest position a reused prefix still needs in the sliding-window cache is
    pos_min_thold = max(0, n_past - n_swa - (0 if new tokens follow else 1)). When the cache's pos_min (its
    sliding-window part's) is that or more, the newest checkpoint whose pos_max does not pass n_past and whose
    pos_min is below the threshold (or 0) is restored into the sliding-window cache and n_past falls back to
    min(max(pos_min + 1, pos_max), its n_tokens); without one, the whole prompt is processed again (n_past 0).
    Then every checkpoint whose pos_max passes the new n_past is erased. Returns n_past."""
    slot = run.slot
    pos_next = n_past
    if n_past > 0:
        thold = max(0, pos_next - ctx.n_swa - (0 if n_past < P else 1))
        pos_min = slot.cache.seq_pos_min()
        if pos_min >= thold:
            found = None
            for c in reversed(slot.checkpoints):
                if c.pos_max > pos_next:
                    continue
                if c.pos_min < thold or c.pos_min == 0:
                    found = c
                    break
            if found is not None:
                slot.cache.swa_restore(found.data)
                pos_next = min(pos_next, max(found.pos_min + 1, found.pos_max))
                n_past = min(pos_next, found.n_tokens)
                log.debug("slot %d: restored context checkpoint (pos_min = %d, pos_max = %d, n_tokens = %d, "
                          "n_past = %d)", slot.id, found.pos_min, found.pos_max, found.n_tokens, n_past)
            else:
                log.debug("slot %d: forcing full prompt re-processing (no usable context checkpoint)", slot.id)
                pos_next = n_past = 0
    slot.checkpoints = [c for c in slot.checkpoints if c.pos_max <= pos_next]
    return n_past


def prompt_batch(ctx, run: "_Run", start: int, P: int, n_batch: int, do_checkpoint: bool,
                 room: int | None = None) -> int:
    """How many prompt tokens from `start` the next llama_decode takes (server-context.cpp's batch filling,
    b11192): at most `room` (what the batch has left: n_batch on one slot; less when other slots' rows came
    first); with checkpoints on, the slot's share also ends before a user message's start (the last one, or one
    past --checkpoint-min-step of the newest checkpoint, or any while there is none) and where exactly
    min(n_batch, 4 + n_ubatch) or min(n_batch, 4) prompt tokens remain (the whole n_batch, not the room), so that
    checkpoints can be made near the prompt's end."""
    room = n_batch if room is None else room
    if not do_checkpoint:
        return min(room, P - start)
    users = {p for r, p in run.task.spans if r == "user"}
    last_user = next((p for r, p in reversed(run.task.spans) if r == "user"), -1)
    cps = run.slot.checkpoints
    tails = [min(n_batch, off) for off in (4 + ctx.model.n_ubatch, 4)]
    n = 0
    while start + n < P and n < room:
        n += 1
        cur = start + n
        if cur in users and (cur == last_user or not cps or cur > cps[-1].n_tokens + ctx.cfg.checkpoint_min_step):
            break
        if any(P == cur + t for t in tails):
            break
    return n


def validate_utf8(b: bytes) -> int:
    """validate_utf8 (server-common.cpp): the length without a multi-byte sequence cut off at the end."""
    n = len(b)
    for i in range(1, min(4, n) + 1):
        c = b[n - i]
        if c & 0xE0 == 0xC0:
            if i < 2:
                return n - i
        elif c & 0xF0 == 0xE0:
            if i < 3:
                return n - i
        elif c & 0xF8 == 0xF0:
            if i < 4:
                return n - i
    return n


def find_partial_stop(s: bytes, stop: bytes) -> int:
    """string_find_partial_stop (common.h): where a suffix of s that is a prefix of stop starts, or -1."""
    if s and stop:
        last = s[-1]
        for ln in range(min(len(s), len(stop)), 0, -1):
            if stop[ln - 1] == last and s.endswith(stop[:ln]):
                return len(s) - ln
    return -1


class _Run:
    """One task's generation state on its slot (server_slot's per-task fields)."""

    def __init__(self, ctx, slot, task, sampler):
        self.ctx, self.slot, self.task = ctx, slot, task
        self.params = task.params
        self.sampler = sampler          # the task's bankml.sampling.Sampler
        self.done = False               # released (its last message sent)
        self.logits = None              # the logits the next sample reads
        self.next_tok = -1              # the token sampled this step, decoded next
        self.stop_words = [w.encode("utf-8", "surrogateescape") for w in (self.params.stop or [])]
        self.generated = b""
        self.generated_tokens: list[int] = []
        self.n_sent = 0
        self.stop = STOP_NONE
        self.stopping_word = b""
        self.has_next = True
        self.has_new_line = False
        self.truncated = False
        self.token_probs: list[TokenProbs] = []
        self.stats = SlotStats()
        n_predict = self.params.n_predict
        self.n_predict_max = n_predict if n_predict != -1 else ctx.cfg.n_predict
        self.n_ctx = min(task.n_ctx, slot.n_ctx) if task.n_ctx > 0 else slot.n_ctx
        self.ctx_shift = bool(getattr(ctx.cfg, "ctx_shift", False)) if task.ctx_shift is None else task.ctx_shift

    def has_budget(self) -> bool:
        return self.n_predict_max == -1 or self.n_predict_max - self.stats.n_gen > 0

    def find_stop(self, text: bytes, last_size: int, full: bool) -> int:
        stop_pos = -1
        for w in self.stop_words:
            if full:
                tmp = len(w) + last_size
                pos = text.find(w, len(text) - tmp if len(text) > tmp else 0)
            else:
                pos = find_partial_stop(text, w)
            if pos != -1 and (stop_pos == -1 or pos < stop_pos):
                if full:
                    self.stop = STOP_WORD
                    self.stopping_word = w
                    self.has_next = False
                stop_pos = pos
        return stop_pos

    def process_token(self, tok: int, piece: bytes, probs: TokenProbs | None) -> bool:
        """process_token: returns whether generation goes on; emits the stream's Token event."""
        tk = self.ctx.tokenizer
        self.generated += piece
        if self.params.return_tokens:
            self.generated_tokens.append(tok)
        self.has_next = True
        incomplete = validate_utf8(self.generated) < len(self.generated)
        send = b""
        if not incomplete:
            pos = min(self.n_sent, len(self.generated))
            test = self.generated[pos:]
            send_text = True
            stop_pos = self.find_stop(test, len(piece), True)
            if stop_pos != -1:
                self.generated = self.generated[:pos + stop_pos]
                pos = min(self.n_sent, len(self.generated))
            elif self.has_next and not tk.is_eog(tok):
                send_text = self.find_stop(test, len(piece), False) == -1
            if send_text:
                send = self.generated[pos:]
                self.n_sent += len(send)
            if probs is not None:
                probs.text = send
                self.token_probs.append(probs)
            if self.params.stream:
                # sent before the limit and EOG checks: only a stop word has set `stop` by now
                stopped = self.stop != STOP_NONE
                self.task.emit(Token(send, tok, self.stats.n_gen, len(self.task.tokens),
                                     self.stats.n_prompt_cached, probs,
                                     self.stats.to_json() if (stopped or self.params.timings_per_token) else None,
                                     stopped))
        if incomplete:
            self.has_next = True
        if not self.ctx_shift and self.slot_tokens_after() + 1 >= self.n_ctx:
            self.truncated = True
            self.stop = STOP_LIMIT
            self.has_next = False
        if self.stats.n_gen > 0 and self.has_next and not self.has_budget():
            self.stop = STOP_LIMIT
            self.has_next = False
        if b"\n" in send:
            self.has_new_line = True
        if tk.is_eog(tok):
            self.stop = STOP_EOS
            self.has_next = False
        return self.has_next

    def slot_tokens_after(self) -> int:
        return len(self.slot.tokens)

    def final(self) -> Final:
        p = self.params
        probs = list(self.token_probs)
        if not p.stream and self.stop == STOP_WORD and probs:
            n = len(self.ctx.tokenizer.tokenize(self.stopping_word.decode("utf-8", "surrogateescape"), False, True))
            probs = probs[:len(probs) - min(len(probs), n)]
        tk = self.ctx.tokenizer
        return Final(
            content=b"" if p.stream else self.generated,
            tokens=[] if p.stream else list(self.generated_tokens),
            id_slot=self.slot.id, n_decoded=self.stats.n_gen, n_prompt_tokens=len(self.task.tokens),
            n_prompt_cached=self.stats.n_prompt_cached, n_tokens_cached=len(self.slot.tokens),
            truncated=self.truncated, stop=self.stop,
            stopping_word=self.stopping_word.decode("utf-8", "replace"), has_new_line=self.has_new_line,
            stats=self.stats.to_json(), probs=probs if p.n_probs > 0 else [],
            prompt=tk.detokenize(self.task.tokens, remove_special=False, unparse_special=True))


def free_slots(pool, n: int, exclude) -> list:
    """get_free_slots: the first n idle slots in id order, the parent's left out."""
    out = []
    for s in pool.slots:
        if not s.processing and s is not exclude:
            out.append(s)
        if len(out) >= n:
            break
    return out


def stream_runs(slot_ids: list[int]) -> list[bool]:
    """Per live sequence (in slot order): whether its token shares a ubatch with other streams. A non-unified
    cache splits the step's batch with split_equal(sequential): a ubatch takes consecutive sequence ids only."""
    out = []
    for i, s in enumerate(slot_ids):
        prev = i > 0 and slot_ids[i - 1] == s - 1
        nxt = i + 1 < len(slot_ids) and slot_ids[i + 1] == s + 1
        out.append(prev or nxt)
    return out


def run_completion(ctx, task: CompletionTask) -> None:
    """One completion task and its n_cmpl - 1 children, start to end, on the worker thread
    (launch_slots_with_parent_task, update_slots): launch_slots gives every task its slot and sampler,
    evaluate_prompt decodes the prompt on the parent's slot, copy_to_children gives each child slot the parent's
    cells, tokens and stats, then every step samples each live sequence in slot order (sample_step) and decodes one
    token of each (decode_step: one llama_decode). The task's last message is sent once its slot and the metrics
    are updated (/metrics after an answer sees its tokens)."""
    runs = launch_slots(ctx, task)
    if runs is None:
        return
    last = None
    try:
        go_on, last = evaluate_prompt(ctx, runs[0])
        if not go_on:
            return
        copy_to_children(runs)
        live = sorted(runs, key=lambda r: r.slot.id)
        while True:
            live = sample_step(ctx, live, len(runs) > 1)
            if not live:
                break
            if task.cancelled.is_set():
                return
            live = decode_step(ctx, live)
            if not live:
                break
    except ModelFileChanged as e:   # the file was cut under the map: not a bug, and already said on stderr
        log.error("generation stopped: %s", e)
        last = Error(500, str(e), "server_error")
    except Exception as e:          # a bug: answer llama-server's 500 instead of hanging the client
        log.exception("generation failed")
        last = Error(500, str(e) or type(e).__name__, "server_error")
    finally:
        # what is still running: an error, a cancel, or an empty prompt's answer (sent on the first of them)
        for j, r in enumerate([r for r in runs if not r.done]):
            _release(ctx.slots, r, last if j == 0 else None, len(runs) > 1, finished=isinstance(last, Final))


def launch_slots(ctx, task: CompletionTask, defer=None) -> list[_Run] | None:
    """launch_slots_with_parent_task: the parent's slot (slot choice and the prompt cache), the token check, the
    children's slots (the first idle ones), every sampler (the children's first), then the slots are marked busy
    and the idle ones cached. None when the task is refused (its Error is emitted), or, given defer(), when no
    slot is idle, the requested one is busy or the children lack free slots (defer() is called: the task waits)."""
    pool, tk = ctx.slots, ctx.tokenizer
    tokens = task.tokens
    group = [task] + list(task.children)
    slot = pool.select(tokens, task.params.id_slot)
    if defer is not None and (slot is None or slot.processing
                              or len(free_slots(pool, len(group) - 1, slot)) < len(group) - 1):
        defer()
        return None
    if any(not 0 <= t < tk.n_vocab for t in tokens):
        task.emit(Error(400, "Prompt contains invalid tokens", "invalid_request_error"))
        return None
    slots = [slot] + free_slots(pool, len(group) - 1, slot)
    samplers = {}
    for t in group[1:] + group[:1]:     # the children are launched first
        try:
            samplers[id(t)] = t.sampler()
        except Exception as e:
            msg = getattr(e, "message", None) or str(e)
            if not msg.startswith("Failed to initialize samplers"):
                msg = "Failed to initialize samplers: " + msg
            task.emit(Error(400, msg, "invalid_request_error"))
            return None
    runs = [_Run(ctx, s, t, samplers[id(t)]) for s, t in zip(slots, group)]
    for r in runs:
        r.slot.processing = True
        r.slot.id_task = r.task.id
    pool.cache_idle(slot)
    pool.n_processing += len(runs)
    return runs


def evaluate_prompt(ctx, run: _Run) -> tuple[bool, object]:
    """The parent's prompt on its slot: the timers start, the reused prefix (LCP with the slot's tokens; a fully
    cached prompt recomputes its last token), then the rest in calls of at most n_batch tokens (a stream's Begin or
    Progress events on the way). Returns (generation goes on, the task's last message so far): an empty prompt
    answers at once, one that does not fit is exceed_context_size_error, a cancel stops between batches."""
    pool, model, worker = ctx.slots, ctx.model, ctx.worker
    task, slot, stats, params = run.task, run.slot, run.stats, run.params
    tokens = task.tokens
    worker.new_id()                 # update_slots posts a NEXT_RESPONSE task (an id) per iteration
    go_on, last = prompt_start(ctx, run)
    if not go_on:
        return go_on, last
    P = len(tokens)
    n_batch = ctx.n_batch
    do_checkpoint = getattr(ctx, "checkpoints_on", False)
    first_batch = True
    while len(slot.tokens) < P:
        if task.cancelled.is_set():
            return False, None
        if not first_batch:
            worker.new_id()
        first_batch = False
        start = len(slot.tokens)
        n = prompt_batch(ctx, run, start, P, n_batch, do_checkpoint)
        chunk = tokens[start:start + n]
        if do_checkpoint:
            _maybe_checkpoint(ctx, run, start, n, P)
        model.decode(chunk, len(slot.tokens), cache=slot.cache)
        prompt_decoded(run, chunk)
        pool.metrics.decoded(len(chunk), prompt=True)
        prompt_progress(run)
    run.logits = model.logits()
    return True, None


def prompt_start(ctx, run: _Run) -> tuple[bool, object]:
    """A prompt's start (update_slots' SLOT_STATE_STARTED): the timers, the checks, the reused prefix, the
    stream's first event. Returns (prompt tokens follow, the task's last message so far)."""
    from .slots import common_prefix
    pool = ctx.slots
    task, slot, stats, params = run.task, run.slot, run.stats, run.params
    tokens = task.tokens
    stats.t_start = time_us()
    stats.e_start = energy.read()
    pool.metrics.start()
    P = len(tokens)
    if P == 0:
        return False, run.final()
    if P >= run.n_ctx:
        return False, Error(400, f"request ({P} tokens) exceeds the available context size ({run.n_ctx} "
                                         "tokens), try increasing it", "exceed_context_size_error",
                                    n_prompt_tokens=P, n_ctx=run.n_ctx)
    n_past = common_prefix(slot.tokens, tokens) if params.cache_prompt else 0
    if slot.cache.has_swa:
        n_past = swa_reuse(ctx, run, n_past, P)
    if n_past == P and n_past > 0:
        n_past -= 1
    stats.n_prompt_cached = n_past
    pool.metrics.prompt_cached(n_past)
    slot.keep_first(n_past)

    if params.stream:
        if params.return_progress:
            task.emit(_progress(run))
        else:
            task.emit(Begin())
    return True, None


def _progress(run: _Run) -> Progress:
    """send_partial_response(is_progress): the slot's timings go along with timings_per_token."""
    st = run.stats
    return Progress(len(run.task.tokens), st.n_prompt_cached, len(run.slot.tokens),
                    (time_us() - st.t_start) // 1000, st.to_json() if run.params.timings_per_token else None)


def prompt_progress(run: _Run) -> None:
    """A streamed task with return_progress gets a Progress event after each decode of its prompt."""
    if run.params.stream and run.params.return_progress:
        run.task.emit(_progress(run))


def prompt_decoded(run: _Run, chunk: list[int]) -> None:
    """A chunk of the prompt went through the model: the slot holds it, the prompt's counters advance."""
    run.slot.tokens.extend(chunk)
    run.stats.n_prompt_processed += len(chunk)
    run.stats.t_prompt_last = time_us()


def _maybe_checkpoint(ctx, run: _Run, start: int, n: int, P: int) -> None:
    """Whether the batch of n prompt tokens from `start` is preceded by a context checkpoint (server-context.cpp's
    do_checkpoint, b11192): a batch that ends the prompt, or starts a user message, or ends within n_ubatch of
    the prompt's end; not while the cache is empty; and not within --checkpoint-min-step of the newest checkpoint
    unless the batch starts the last user message or is near the end."""
    spans = run.task.spans
    near_end = P < start + n + ctx.model.n_ubatch
    is_user_start = any(r == "user" and p == start for r, p in spans)
    last_user = next((p for r, p in reversed(spans) if r == "user"), -1)
    if start + n < P and not is_user_start and not near_end:
        return
    cache = run.slot.cache
    pos_min, pos_max = cache.seq_pos_min(), cache.seq_pos_max()
    if pos_min < 0:
        return
    cps = run.slot.checkpoints
    if cps and not (start == last_user or near_end or start > cps[-1].n_tokens + ctx.cfg.checkpoint_min_step):
        return
    create_checkpoint(ctx, run, start, pos_min, pos_max)


def copy_to_children(runs: list[_Run]) -> None:
    """copy_state_to: each child slot gets the parent's cells (seq_cp: on a split cache its stream cell for cell,
    the sliding-window cache's too, KVCache.copy_from; on a unified one a save / restore of the sequence), its
    tokens and context checkpoints (prompt.clone()) and its stats (and its logits); then every sampler sees the
    prompt."""
    parent = runs[0]
    logits = parent.logits
    prompt = list(parent.task.tokens)
    if len(runs) > 1:
        logits = logits.copy()
        src = parent.slot.cache
        state = None if isinstance(src, KVCache) else src.save()
        for r in runs[1:]:
            if state is None:
                r.slot.cache.copy_from(src)
            else:
                r.slot.cache.restore(state)
            r.slot.tokens = list(parent.slot.tokens)
            r.slot.checkpoints = list(parent.slot.checkpoints)
            r.stats.__dict__.update(parent.stats.__dict__)
    for r in runs:
        r.sampler.begin(prompt)
        r.logits = logits


def sample_step(ctx, live: list[_Run], grouped: bool) -> list[_Run]:
    """One step's sampling, sequence after sequence in slot order: sample, accept, the timers, the piece, the
    probabilities, process_token; a sequence that stops is released (its Final sent). Returns the live ones."""
    for r in live:
        sample_one(ctx, r, grouped)
    return [r for r in live if not r.done]


def sample_one(ctx, r: _Run, grouped: bool) -> None:
    """post_decode for one sequence: sample its row, accept, the timers, the piece, the probabilities,
    process_token; a sequence that stops is released (its Final sent)."""
    params = r.params
    t = int(r.sampler.sample(r.logits))
    r.sampler.accept(t)
    now = time_us()
    r.stats.n_gen += 1
    if r.stats.n_gen == 1:
        r.stats.t_prompt_last = now
        r.stats.e_prompt = energy.read()
    r.stats.t_gen_last = now
    piece = ctx.tokenizer.token_to_piece(t, t in (params.preserved_tokens or ()))
    probs = r.task.probs(r.task, r.logits, r.sampler, t) if (params.n_probs > 0 and r.task.probs) else None
    r.next_tok = t
    if not r.process_token(t, piece, probs):
        r.done = True
        _release(ctx.slots, r, r.final(), grouped)


def context_shift(ctx, r: _Run) -> None:
    """pre_decode's context shift of a generating slot whose tokens + 1 reach n_ctx
    (tools/server/server-context.cpp:2933-2970, b11192): n_keep is the request's (-1: the whole prompt), plus 1
    when the vocabulary adds a BOS, at most n_ctx - 4; n_discard the request's, or half of what follows n_keep
    when 0, clamped to [0, n_left - 1]. The cache drops positions [n_keep, n_keep + n_discard) and moves the
    rest down (K re-rotated, bankml.engine.model.KVCache.shift), the slot's tokens likewise; truncated is set."""
    p, slot = r.params, r.slot
    n_keep = len(r.task.tokens) if p.n_keep < 0 else p.n_keep
    if ctx.tokenizer.add_bos:
        n_keep += 1
    n_keep = min(r.n_ctx - 4, n_keep)
    n_left = len(slot.tokens) - n_keep
    n_discard = p.n_discard if p.n_discard else int(n_left / 2)
    n_discard = min(max(n_discard, 0), max(0, n_left - 1))
    log.warning("slot %d: context shift, n_keep = %d, n_left = %d, n_discard = %d", slot.id, n_keep, n_left,
                n_discard)
    ctx.model.context_shift(n_keep, n_discard, cache=slot.cache)
    slot.tokens = slot.tokens[:n_keep] + slot.tokens[n_keep + n_discard:]
    r.truncated = True


def decode_step(ctx, live: list[_Run]) -> list[_Run]:
    """One update_slots iteration's decode: first pre_decode's context shift of each slot that is full (with
    --context-shift; a shared prompt's sequences are refused instead), then each live sequence's next token at
    its position (one llama_decode for all of them; neighbour slots share a ubatch, stream_runs), their logits,
    the metrics. Returns the sequences still live."""
    model = ctx.model
    grouped = len(live) > 1 or any(r.task.id_parent != -1 or r.task.children for r in live)
    live = pre_decode(ctx, live, lambda r: grouped)
    if not live:
        return live
    ctx.worker.new_id()
    multi = stream_runs([r.slot.id for r in live])
    for r, m in zip(live, multi):
        model.decode([r.next_tok], len(r.slot.tokens), cache=r.slot.cache, multi_stream=m)
        r.slot.tokens.append(r.next_tok)
        r.logits = model.logits() if len(live) == 1 else model.logits().copy()
    ctx.slots.metrics.decoded(len(live), prompt=False)
    return live


def pre_decode(ctx, live: list[_Run], grouped) -> list[_Run]:
    """pre_decode: each generating slot whose tokens + 1 reach n_ctx is shifted (with --context-shift), or, when
    grouped(run) (a shared prompt's sequence), refused. Returns the sequences still live."""
    for r in live:
        if r.ctx_shift and len(r.slot.tokens) + 1 >= r.n_ctx:
            if isinstance(r.slot.cache, UnifiedSeq):
                # seq_add with the K re-rotation of one sequence in a shared stream: not built on UnifiedCache
                _release(ctx.slots, r, Error(501, "context shift on a unified KV cache (-kvu, -np auto) is not "
                                             "reproduced by bankml yet", "not_supported_error"),
                         grouped(r), finished=False)
                continue
            if grouped(r):
                # send_error + slot.release (server-context.cpp:2928): no prediction metrics for it
                _release(ctx.slots, r, Error(500, "context shift cannot be used for shared prompt",
                                             "server_error"), True, finished=False)
                continue
            context_shift(ctx, r)
    return [r for r in live if not r.done]


def _release(pool, r, last, grouped: bool, finished: bool = True) -> None:
    """send_final_response, metrics.on_prediction, slot.release (a child slot drops its cells)."""
    slot = r.slot
    pool.metrics.finished(r, finished)
    pool.n_processing -= 1
    slot.last = {"n_prompt_tokens": len(r.task.tokens), "stats": r.stats, "params": r.task.params, "run": r}
    slot.processing = False
    slot.t_last_used = time_us()
    if grouped and r.task.id_parent != -1:
        slot.clear()            # "do not keep context of the child slots"
    r.done = True
    if last is not None:
        r.task.emit(last)
    hook = getattr(pool, "on_release", None)
    if hook is not None:
        hook(slot.id)               # callback_on_release: a deferred task goes back to the queue's front
