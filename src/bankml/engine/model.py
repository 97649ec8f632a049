"""A loaded model and its forward pass: llama.cpp b11192's llama graph on the CPU, bit for bit.

Owns: the hyper-parameters (`HParams`) and the weights (views into the file's mmap) as the architecture's
description in bankml.models.arch says to read them, the KV caches, the calls into the compiled forward pass
(bankml.engine._forward). Must not know: tokenizers, templates, sampling, HTTP; which keys, tensors and graph
checks an architecture has (its description: the guard and this module read the same one).
Mirrors: src/llama-model.cpp (hparams), src/models/llama.cpp (graph), src/llama-context.cpp (decode: ubatches,
outputs), src/llama-kv-cache.cpp (cells).

    model = Model.open(path, n_ctx=4096, n_threads=None, oracle_threads=2)
    model.decode(tokens, pos)      # one llama_decode: logits of the last token
    row = model.logits()           # float32[n_vocab] view, valid until the next decode
    model.truncate(n)              # llama_memory_seq_rm(seq, n, -1)
    rows = model.embed(tokens, pos)     # decode with embeddings on: float32[n][n_embd] t_embd
    vec = Model.pool(rows, "mean"); Model.normalize(vec, 2)   # build_pooling, common_embd_normalize
    model.context_shift(n_keep, n_discard)   # llama-server's context shift (seq_rm + seq_add + K re-rotation)
    rows = model.decode_batch([(seq_id, cache, tokens, pos), ...])   # several sequences, one cache each
    ucache = model.new_unified_cache()        # one stream shared by several sequences (-kvu, -np auto)
    rows = model.decode_unified(ucache, [(seq_id, tokens, pos), ...]); ucache.seq_rm(seq_id)
"""

from __future__ import annotations

import logging
import mmap
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import numpy as np

from ..models import arch, gguf, verify
from ..errors import ContextFull, InvalidToken, ModelRefused, PositionMismatch
from . import _forward
from ._threads import effective_threads, release_pool

log = logging.getLogger("bankml.engine")

KV_PAD = 256          # llama_context pads n_ctx (and so the cache) to 256 cells
N_UBATCH = 512        # llama-server's default --ubatch-size
N_BATCH = 2048        # llama-server's default --batch-size (the server cuts prompts into calls of this size)
CACHE_TYPES = ("f16", "q8_0")


def pad_ctx(n: int) -> int:
    """n rounded up to a multiple of KV_PAD, as llama_context pads n_ctx."""
    return -(-n // KV_PAD) * KV_PAD


def split_equal(seqs, n_ubatch: int):
    """The ubatches llama_batch_allocr::split_equal(n_ubatch, sequential = true) cuts from a batch of whole
    sequences (one KV stream each): seqs, in the batch's order, are (seq_id, n_tokens). Yields (members, nst): the
    indices in seqs of the ubatch's sequences (from the first with tokens left, each next one whose id is the
    previous one's + 1) and the tokens each gives (the fewest any of them has left, while (nst + 1) x members
    stays within n_ubatch; one at least). Rows are grouped by sequence, in members' order."""
    left = [int(n) for _, n in seqs]
    while True:
        members, last = [], None
        for i, (sid, _) in enumerate(seqs):
            if left[i] and (last is None or sid == last + 1):
                members.append(i)
                last = sid
        if not members:
            return
        nst = max(1, min(min(left[i] for i in members), n_ubatch // len(members)))
        for i in members:
            left[i] -= nst
        yield members, nst


# weight types whose matrix products give every column the bits of a one-column product, measured against
# llama-server's n > 1 steps (one product over every live choice's column; bankml decodes each choice alone).
# F16 differs: ggml takes another kernel for several columns.
MULTI_CHOICE_WEIGHTS = frozenset({"Q4_1", "Q8_0"})

# the graphs whose ubatch holds several sequences' KV streams (forward_llama.c, forward_gemma3.c: each sequence its
# own caches, Gemma 3's base and sliding-window ones): decode_batch refuses the others
MULTI_SEQ_ARCHS = frozenset({"llama", "qwen3", "gemma3"})
# the graphs whose ubatch holds a unified cache's rows (several sequences in one stream): new_unified_cache and
# decode_unified refuse the others
UNIFIED_ARCHS = frozenset({"llama", "qwen3", "gemma3"})


@dataclass(frozen=True)
class HParams:
    """What the graph needs from the header, filled from the architecture's description (bankml.models.arch:
    each field's key and default rule; llama's keys in comments)."""

    arch: str
    n_embd: int          # embedding_length
    n_layer: int         # block_count
    n_head: int          # attention.head_count
    n_head_kv: int       # attention.head_count_kv (default n_head)
    head_dim: int        # attention.key_length (default n_embd / n_head)
    head_dim_v: int      # attention.value_length (default head_dim)
    n_rot: int           # rope.dimension_count (default head_dim)
    n_ff: int            # feed_forward_length
    n_vocab: int         # vocab_size, or the number of tokens
    n_ctx_train: int     # context_length
    rms_eps: float       # attention.layer_norm_rms_epsilon
    rope_freq_base: float  # rope.freq_base (default 10000)
    tied_output: bool    # no output.weight: the head is token_embd
    extra: Mapping[str, Any] = field(default_factory=dict)  # the description's fields not named above

    @property
    def kq_scale(self) -> float:
        return float(np.float32(1.0) / np.sqrt(np.float32(self.head_dim)))


# the fields every description fills (the others of the description go to HParams.extra)
_OWN_FIELDS = tuple(f.name for f in fields(HParams) if f.name not in ("arch", "tied_output", "extra"))
# the engine config's fields (the compiled graph's hyper-parameters), then the description's extra fields
_CONFIG_FIELDS = ("n_embd", "n_layer", "n_head", "n_head_kv", "head_dim", "n_rot", "n_ff", "n_vocab", "rms_eps",
                  "rope_freq_base")


def _hparams(desc: arch.Architecture, reading: arch.Reading, h: gguf.GGUFHeader) -> HParams:
    v = reading.values
    return HParams(arch=desc.name, tied_output=desc.tied(h.tensors),
                   extra={k: x for k, x in v.items() if k not in _OWN_FIELDS}, **{k: v[k] for k in _OWN_FIELDS})


def _config(hp: HParams) -> dict:
    config = {k: getattr(hp, k) for k in _CONFIG_FIELDS}
    config["kq_scale"] = hp.kq_scale
    config.update(hp.extra)
    return config


def _matrix(f: gguf.GGUFFile, name: str):
    ti = f.tensors[name]
    k = ti.shape[0]
    m = ti.n_elements // k
    return (f.tensor_bytes(name), int(ti.type), int(k), int(m), gguf.row_bytes(ti.type, k))


def _vector(f: gguf.GGUFFile, name: str) -> np.ndarray:
    return f.tensor(name)


# how a tensor of each role (capabilities.WEIGHT_TYPES) is handed to the compiled graph
_LOADERS = {"matrix": _matrix, "embedding": _matrix, "vector": _vector}


def _weights(desc: arch.Architecture, f: gguf.GGUFFile, n_layer: int) -> dict:
    """The engine's weights dict from the description's tensor table: each tensor in its slot (per layer in
    "layers"), an absent tensor replaced by the one it is tied to, an absent optional one left out."""
    weights: dict = {"layers": [{} for _ in range(n_layer)]}
    for t in desc.tensors:
        for i, name in enumerate(t.names(n_layer)):
            if name not in f.tensors:
                if t.tied_to is None:
                    continue
                name = t.tied_to.replace("{i}", str(i))
            (weights["layers"][i] if t.per_layer else weights)[t.slot] = _LOADERS[t.role](f, name)
    if desc.swa != "none":  # which layers attend through the sliding window
        for layer, swa in zip(weights["layers"], desc.swa_layers(n_layer)):
            layer["swa"] = swa
    return weights


class CacheState(bytes):
    """KVCache.save(): the used cells' K and V rows in cell order; `positions` the position each holds (None while
    cell == position, as before any context shift); `swa` the sliding-window cache's part (KVCache.swa_save()),
    None for a model without sliding-window layers."""
    positions: tuple | None = None
    swa: tuple | None = None


class KVCache:
    """One sequence's KV cache (llama-server: one slot's cells): n_ctx cells (a multiple of 256) of K and V for
    every layer, F16 or Q8_0. The cache holds positions 0 .. n_past-1: cell == position until a context shift
    (shift()) moves positions down, after which cells hold them in another order (as llama.cpp's cells do)."""

    def __init__(self, model: "Model", n_ctx: int, cache_type: str = "f16"):
        if cache_type not in CACHE_TYPES:
            raise ValueError(f"cache type {cache_type!r} is not one of {', '.join(CACHE_TYPES)}")
        desc = arch.ARCHITECTURES[model.hparams.arch]
        kinds = desc.cache_types
        if cache_type not in kinds:
            raise ValueError(f"a {cache_type} KV cache for a {model.hparams.arch} model is not reproduced by bankml "
                             f"yet (only {', '.join(kinds)})")
        self.n_ctx = n_ctx
        self.cache_type = cache_type
        self._arch = desc.name
        self._c = _forward._KVCache(model._fwd, n_ctx, cache_type, swa_full=model.swa_full, rope=desc.rope)
        hp = model.hparams
        t = gguf.GGMLType.F16 if cache_type == "f16" else gguf.GGMLType.Q8_0
        self._layout = (hp.n_layer, int(t), gguf.row_bytes(t, hp.n_head_kv * hp.head_dim),
                        gguf.row_bytes(t, hp.n_head_kv * hp.head_dim_v))
        if hp.n_layer * (self._layout[2] + self._layout[3]) != self._c.cell_bytes:
            raise RuntimeError("the KV cache's rows are not llama.cpp's (n_head_kv x head_dim per layer)")

    @property
    def n_past(self) -> int:
        return self._c.n_past

    def truncate(self, n: int) -> None:
        """Drop every position >= n (llama_memory_seq_rm(seq, n, -1)); the cell contents stay, masked."""
        if n < 0:
            raise ValueError(f"cannot truncate to {n} positions")
        self._c.seq_rm(n, -1)

    def clear(self) -> None:
        self._c.clear()

    def shift(self, n_keep: int, n_discard: int) -> None:
        """llama-server's context shift (tools/server/server-context.cpp pre_decode, b11192): drop positions
        [n_keep, n_keep + n_discard) (llama_memory_seq_rm), move the later ones down by n_discard
        (llama_memory_seq_add up to n_past) and re-rotate every cell's K by its shift (the KV update llama.cpp runs
        at the next decode: src/llama-kv-cache.cpp build_graph_shift) with the model's RoPE type (NORMAL for llama,
        NEOX for qwen3), F16 or Q8_0 (dequantize, rope, requantize). A cache with sliding-window layers (Gemma 3)
        is refused (ValueError)."""
        n_past = self.n_past
        if n_keep < 0 or n_discard < 0 or n_keep + n_discard > n_past:
            raise ValueError(f"a shift of {n_discard} after {n_keep} kept positions of {n_past}")
        self._c.seq_rm(n_keep, n_keep + n_discard)
        self._c.seq_add(n_keep + n_discard, n_past, -n_discard)

    def positions(self) -> np.ndarray:
        """int32[n_ctx]: the position in each cell, -1 when empty."""
        return self._c.positions()

    # --- the sliding-window part (llama_kv_cache_iswa's SWA cache; models with sliding-window layers) ----------

    @property
    def has_swa(self) -> bool:
        """The model has sliding-window layers: a second, smaller cache holds their K and V."""
        return self._c.has_swa

    def seq_pos_min(self) -> int:
        """llama_memory_seq_pos_min: the sliding-window cache's smallest position when there is one (an iswa
        cache answers for it), else the cache's; -1 when empty."""
        if self._c.has_swa:
            return self._c.swa_pos_min
        p = self._c.positions()
        p = p[p >= 0]
        return int(p.min()) if p.size else -1

    def seq_pos_max(self) -> int:
        """llama_memory_seq_pos_max (the sliding-window cache's when there is one); -1 when empty."""
        return self._c.swa_pos_max if self._c.has_swa else self._c.n_past - 1

    def swa_save(self) -> tuple:
        """(positions in cell order, bytes): the sliding-window cache's cells, what llama_state_seq_get_data with
        LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY keeps of an iswa cache (a context checkpoint's data)."""
        pos, data = self._c.swa_state()
        return tuple(int(p) for p in pos), data

    def swa_restore(self, state: tuple) -> None:
        """Put a swa_save() back into the sliding-window cache as llama_state_seq_set_data with PARTIAL_ONLY does
        (state_read_meta's seq_rm, find_slot, apply_ubatch); the base cache is not touched."""
        positions, data = state
        self._c.swa_load(np.asarray(positions, dtype=np.int32), data)

    def state_size(self, n_cells: int = 1) -> int:
        """Bytes of save() for n_cells positions (K and V rows of every layer)."""
        return n_cells * self._c.cell_bytes

    def layout(self) -> tuple[int, int, int, int]:
        """(n_layer, ggml type of K and V, K row bytes, V row bytes): what llama.cpp's state file says of each
        layer (llama-kv-cache.cpp state_write_data, b11192); save() holds, per layer, the K rows then the V rows."""
        return self._layout

    def save(self) -> CacheState:
        """The cache's used cells (K and V rows of every layer) in cell order, for restore(); `positions` of the
        result is None while cell == position, else the position of each saved cell."""
        pos = self._c.positions()
        held = pos[pos >= 0]
        state = CacheState(self._c.state_bytes(int(held.size)))
        if not np.array_equal(held, np.arange(held.size)):
            state.positions = tuple(int(p) for p in held)
        if self._c.has_swa:
            state.swa = self.swa_save()
        return state

    def copy_from(self, other: "KVCache") -> None:
        """Make this cache a copy of `other` cell for cell (K/V bytes, positions, search head; the
        sliding-window part too): llama_memory_seq_cp between two slots' streams (llama-server's copy_state_to
        of a parent's prompt to its n > 1 children). ValueError for caches of another shape."""
        self._c.copy_from(other._c)

    def restore(self, state: bytes) -> None:
        """Replace the contents with a save() of a cache of the same model and type. A state of the wrong size
        raises before anything changes."""
        row = self.state_size(1)
        if len(state) % row:
            raise ValueError(f"{len(state)} bytes are not a saved state of this cache")
        n = len(state) // row
        if n > self.n_ctx:
            raise ContextFull(0, n, self.n_ctx)
        swa = getattr(state, "swa", None)
        if self._c.has_swa and swa is None:
            raise ValueError("a saved state without the sliding-window cache's part")
        self._c.load_state(state, n, getattr(state, "positions", None))
        if self._c.has_swa:
            self.swa_restore(swa)   # llama_kv_cache_iswa::state_read: the base cache, then the SWA one


class UnifiedCache:
    """llama-server's unified KV cache (`-kvu`, and `-np auto`): one stream of n_ctx cells (a multiple of 256) that
    every sequence shares, each cell holding one sequence's position (llama_kv_cache with kv_unified, one
    stream). A sequence's tokens take the first empty cells from the search head, so sequences interleave and
    fill the holes seq_rm leaves (docs/engine.md "A unified cache"). Decode with Model.decode_unified. The llama,
    qwen3 and gemma3 graphs (UNIFIED_ARCHS); no context shift, no seq_cp (one sequence per cell); one sequence's
    save/restore through seq(seq_id) (UnifiedSeq), both parts with sliding-window layers. A model with sliding-window
    layers (Gemma 3) gets a unified sliding-window cache beside it, as llama_kv_cache_iswa makes it for n_seq_max
    sequences: pad(min(n_ctx, n_swa * n_seq_max + n_ubatch), 256) cells (n_ctx with --swa-full)."""

    def __init__(self, model: "Model", n_ctx: int, cache_type: str = "f16", n_seq_max: int = 1):
        if cache_type not in CACHE_TYPES:
            raise ValueError(f"cache type {cache_type!r} is not one of {', '.join(CACHE_TYPES)}")
        self.n_ctx = n_ctx
        self.cache_type = cache_type
        self._c = _forward._KVCache(model._fwd, n_ctx, cache_type, swa_full=model.swa_full, n_seq=n_seq_max)
        self._c.make_unified()

    def n_past(self, seq_id: int) -> int:
        """The sequence's largest position + 1 (0 when it holds none): its next position."""
        return self._c.useq_pos_max(int(seq_id)) + 1

    def seq_pos_min(self, seq_id: int) -> int:
        return self._c.useq_pos_min(int(seq_id))

    def seq_pos_max(self, seq_id: int) -> int:
        return self._c.useq_pos_max(int(seq_id))

    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> None:
        """llama_memory_seq_rm(mem, seq_id, p0, p1): the sequence's cells holding p0 <= pos < p1 (p0 < 0: from 0,
        p1 < 0: no end) become empty (holes; their K/V bytes stay, as llama.cpp's do); the search head moves back
        to the first freed cell when it is below it. seq_id -1: every sequence. llama-server calls it with
        (slot, -1, -1) when a slot's conversation is dropped and (slot, n_keep, -1) to keep a cached prefix.
        Logged at debug level (`kv: seq_rm S P0 P1`), with the server's batch lines enough to replay a run."""
        if log.isEnabledFor(logging.DEBUG):
            log.debug("kv: seq_rm %d %d %d", seq_id, p0, p1)
        self._c.useq_rm(int(seq_id), int(p0), int(p1))

    def clear(self) -> None:
        """llama_memory_clear: every cell empty, head 0 (logged at debug level: `kv: clear`)."""
        log.debug("kv: clear")
        self._c.clear()

    @property
    def used(self) -> int:
        return self._c.used

    @property
    def head(self) -> int:
        return self._c.head

    def cells(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, seq ids) of every cell, -1 where empty (cell order)."""
        return self._c.positions(), self._c.cell_seqs()

    def seq(self, seq_id: int) -> "UnifiedSeq":
        """One sequence of this cache seen as a slot's cache (UnifiedSeq)."""
        return UnifiedSeq(self, seq_id)

    @property
    def swa_size(self) -> int:
        """Cells of the unified sliding-window cache (0: the model has no sliding-window layers)."""
        return self._c.swa_size

    def swa_seq_pos_min(self, seq_id: int) -> int:
        """The sequence's smallest position in the sliding-window cache (-1: none there)."""
        return self._c.useq_swa_pos_min(int(seq_id))

    def state_size(self, n_cells: int = 1) -> int:
        """Bytes of a sequence's saved state for n_cells cells (K and V rows of every layer)."""
        return n_cells * self._c.cell_bytes


class UnifiedSeq:
    """One sequence (a llama-server slot, seq id = slot id) of a UnifiedCache, with the part of KVCache's API a
    server slot uses: n_past, truncate (llama_memory_seq_rm(seq, n, -1)), clear (seq_rm(seq, -1, -1)), save /
    restore of the sequence alone (llama_state_seq_get_data / set_data: its cells in cell order with their
    positions; restored through find_slot, so the cells go where the search head finds room, as in libllama).
    With sliding-window layers, seq_pos_min / seq_pos_max are the sliding-window cache's (llama_kv_cache_iswa
    answers for it), swa_save / swa_restore are the sequence's part of the shared sliding-window cache (a context
    checkpoint: LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY) and save / restore carry both parts. Decode through
    Model.decode_unified(view.cache, [(view.seq_id, tokens, pos)]). No context shift."""

    def __init__(self, cache: UnifiedCache, seq_id: int):
        self.cache, self.seq_id = cache, int(seq_id)
        self.n_ctx = cache.n_ctx
        self.cache_type = cache.cache_type
        self.has_swa = cache.swa_size > 0

    @property
    def n_past(self) -> int:
        return self.cache.n_past(self.seq_id)

    def truncate(self, n: int) -> None:
        if n < 0:
            raise ValueError(f"cannot truncate to {n} positions")
        self.cache.seq_rm(self.seq_id, n, -1)

    def clear(self) -> None:
        self.cache.seq_rm(self.seq_id, -1, -1)

    def seq_pos_min(self) -> int:
        if self.has_swa:
            return self.cache.swa_seq_pos_min(self.seq_id)
        return self.cache.seq_pos_min(self.seq_id)

    def seq_pos_max(self) -> int:
        if self.has_swa:
            return self.cache._c.useq_swa_pos_max(self.seq_id)
        return self.cache.seq_pos_max(self.seq_id)

    def state_size(self, n_cells: int = 1) -> int:
        return self.cache.state_size(n_cells)

    def swa_save(self) -> tuple:
        """(positions in cell order, bytes): the sequence's cells of the shared sliding-window cache that its window
        still shows (llama_state_seq_get_data with PARTIAL_ONLY on a unified iswa cache)."""
        pos, data = self.cache._c.useq_state(self.seq_id, True)
        return tuple(int(p) for p in pos), data

    def swa_restore(self, state: tuple) -> None:
        """A swa_save() back into the shared sliding-window cache (llama_state_seq_set_data with PARTIAL_ONLY): the
        sequence's cells there are dropped and the saved ones take the cells find_slot gives them from the head;
        the base cache is not touched. ContextFull when there is no room (the sequence then holds nothing there)."""
        positions, data = state
        log.debug("kv: restore swa %d %d", self.seq_id, len(positions))
        if not self.cache._c.useq_load(self.seq_id, np.asarray(positions, dtype=np.int32), bytes(data), True):
            raise ContextFull(self.cache.used, len(positions), self.n_ctx)

    def shift(self, n_keep: int, n_discard: int) -> None:
        raise NotImplementedError("a context shift on a unified KV cache is not reproduced by bankml yet")

    def save(self) -> CacheState:
        """The sequence's cells in cell order (positions: the position each holds, always set; swa: its
        sliding-window part, swa_save(), with sliding-window layers)."""
        pos, data = self.cache._c.useq_state(self.seq_id)
        state = CacheState(data)
        state.positions = tuple(int(p) for p in pos)
        if self.has_swa:
            state.swa = self.swa_save()
        return state

    def restore(self, state: bytes) -> None:
        """llama_state_seq_set_data into this sequence: its cells are dropped, the saved ones (in their saved
        order, positions from state.positions, else 0 .. n-1) take the cells find_slot gives them. ContextFull
        when there is no room (the sequence then holds nothing, as in libllama). With sliding-window layers the
        state's sliding-window part follows (llama_kv_cache_iswa::state_read: the base cache, then that one)."""
        swa = getattr(state, "swa", None)
        if self.has_swa and swa is None:
            raise ValueError("a saved state without the sliding-window cache's part")
        row = self.state_size(1)
        if len(state) % row:
            raise ValueError(f"{len(state)} bytes are not a saved state of this cache")
        n = len(state) // row
        pos = getattr(state, "positions", None)
        pos = np.arange(n, dtype=np.int32) if pos is None else np.asarray(pos, dtype=np.int32)
        log.debug("kv: restore %d %d", self.seq_id, n)     # cells from outside the run: a replay stops here
        if not self.cache._c.useq_load(self.seq_id, pos, bytes(state)):
            raise ContextFull(self.cache.used, n, self.n_ctx)
        if self.has_swa:
            self.swa_restore(swa)


class Model:
    """A verified GGUF model and its forward pass. Open with `Model.open`."""

    def __init__(self, path: str, file: gguf.GGUFFile, hp: HParams, n_ctx: int, n_threads: int,
                 oracle_threads: int, cache_type: str, n_ubatch: int, regroup: bool = True, swa_full: bool = False):
        self.path = path
        # --swa-full: the sliding-window layers' cache has n_ctx cells (llama_context_params.swa_full); only a
        # model with such layers has it (llama-server turns it off for the others)
        self.swa_full = bool(swa_full) and arch.ARCHITECTURES[hp.arch].swa != "none"
        self._file = file
        self.hparams = hp
        self.n_ctx = n_ctx
        self.n_ctx_train = hp.n_ctx_train
        self.n_vocab = hp.n_vocab
        self.n_threads = n_threads
        self.oracle_threads = oracle_threads
        self.n_ubatch = n_ubatch
        # the ggml types of the matrices (tensors of 2+ dimensions): which column-count rules the products follow
        self.weight_types = frozenset(gguf.GGMLType(int(ti.type)).name for ti in file.tensors.values()
                                      if len(ti.shape) >= 2)
        desc = arch.ARCHITECTURES[hp.arch]
        weights = _weights(desc, file, hp.n_layer)
        config = _config(hp)
        if desc.swa != "none":  # sliding-window layers: their type (the window is the field n_swa)
            config["swa_type"] = desc.swa_type
        # llama-server repacks Q4_K, Q4_0 and IQ4_NL matrices (CPU_REPACK, q4_K_8x8 / q4_0_8x8 / iq4_nl_8x8):
        # their bits need the repacked kernels, so such a model is always regrouped (docs/kquants.md)
        regroup = regroup or bool({"Q4_K", "Q4_0", "IQ4_NL"} & self.weight_types)
        self._fwd = _forward._Forward(hp.arch, config, weights, n_ubatch, n_ctx, n_threads, oracle_threads,
                                      regroup)
        if regroup:
            # the Q4_1 / Q8_0 matrices now live in their regrouped copies: the file's pages need not stay
            # resident (the norms and the embedding rows are faulted back in as they are read)
            try:
                file.buffer().madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError):
                pass
        self.cache = KVCache(self, n_ctx, cache_type)

    @classmethod
    def open(cls, path: str | os.PathLike, n_ctx: int | None = 4096, n_threads: int | None = None,
             oracle_threads: int = 2, cache_type: str = "f16", progress=None, regroup: bool = True,
             n_batch: int | None = None, n_ubatch: int | None = None, swa_full: bool = False) -> "Model":
        """Verify (guard + sha256 pin) and map a model. n_ctx: llama-server's -c (None or 0: the model's
        training context), rounded up to 256 as llama.cpp does; n_threads: the threads bankml uses (default:
        OMP_NUM_THREADS or the physical cores); oracle_threads: the -t of the llama-server whose bits are
        reproduced; cache_type: --cache-type-k/v ("f16" or "q8_0", both alike); regroup: copy the Q4_1 / Q8_0
        matrices into bankml's 8-row layout (faster, the same bits; False reads the file's layout); n_batch /
        n_ubatch: llama-server's -b / -ub (decode cuts each call into ubatches of n_ubatch); swa_full: --swa-full
        (a model with sliding-window layers gets a full-size cache for them)."""
        path = os.fspath(path)
        verify.verify(path, progress)
        f = gguf.GGUFFile(path)
        try:
            desc = arch.ARCHITECTURES[f.header.architecture]  # verify played it: a described architecture
            reading = desc.read(f.header)
            if reading.reasons:  # the guard's own reasons: nothing reaches here that verify did not play
                raise ModelRefused(path, reading.reasons)
            hp = _hparams(desc, reading, f.header)
            if n_ctx is None or n_ctx == 0:
                n_ctx = hp.n_ctx_train
            if n_ctx < 0:
                raise ValueError(f"n_ctx must be positive, got {n_ctx}")
            n_ctx = pad_ctx(n_ctx)
            if oracle_threads <= 0:
                raise ValueError(f"oracle_threads must be positive, got {oracle_threads}")
            if cache_type not in CACHE_TYPES:
                raise ValueError(f"cache type {cache_type!r} is not one of {', '.join(CACHE_TYPES)}")
            # llama-server's -b / -ub (defaults 2048 / 512): n_batch <= n_ctx, n_ubatch <= n_batch
            n_batch = min(n_ctx, N_BATCH if n_batch is None else n_batch)
            n_ubatch = min(n_batch, N_UBATCH if n_ubatch is None else n_ubatch)
            if n_ubatch <= 0:
                raise ValueError(f"n_ubatch must be positive, got {n_ubatch}")
            model = cls(path, f, hp, n_ctx, effective_threads(n_threads), oracle_threads, cache_type, n_ubatch,
                        regroup, swa_full)
            release_pool()      # the regroup's threads: the thread that decodes is then the only team (_threads)
            return model
        except BaseException:
            f.close()
            raise

    # --- the contract (docs/architecture.md, "Engine") ----------------------------------------------------

    @property
    def n_past(self) -> int:
        """Positions held by the model's KV cache."""
        return self.cache.n_past

    def new_cache(self, n_ctx: int | None = None, cache_type: str | None = None) -> KVCache:
        """Another KV cache over the same weights (another slot): n_ctx cells (<= the model's n_ctx)."""
        n = self.n_ctx if n_ctx is None else pad_ctx(n_ctx)
        if n <= 0 or n > self.n_ctx:
            raise ValueError(f"a cache of {n} cells: 1 .. {self.n_ctx} (the model's n_ctx)")
        return KVCache(self, n, cache_type or self.cache.cache_type)

    def decode(self, tokens, pos: int, cache: KVCache | None = None, multi_stream: bool = False) -> None:
        """One llama_decode call: the tokens at positions pos .. pos+len-1 go through the graph in ubatches of
        n_ubatch (512), their K and V enter the cache, and the logits of the last token are computed (read them
        with logits()). pos must be the cache's n_past. Raises PositionMismatch, ContextFull, InvalidToken, or
        ValueError for an empty call; the cache is unchanged when it raises. Raises ModelFileChanged when the file
        was cut under its map while the pass ran: nothing it computed (logits, the cache's new cells) may be used,
        and the model serves nothing more. multi_stream: these tokens are one sequence's share of a llama_decode
        whose ubatch holds several sequences' streams (llama-server's n > 1 choices in a non-unified cache); ggml
        then never takes the split-KV attention path, nor does this."""
        cache = cache or self.cache
        arr = self._checked(tokens, pos, cache)
        rc = self._fwd.decode(cache._c, arr.astype(np.int32), pos, multi_stream)
        self._status(rc, cache, arr)

    def decode_batch(self, items, outputs=None) -> list[np.ndarray | None]:
        """One llama_decode holding several sequences, as llama-server's update_slots gathers them with a
        non-unified KV cache (-np N without -kvu): items, in the batch's order, are (seq_id, cache, tokens, pos)
        (seq_id: the slot id, llama_seq_id; cache: that sequence's own KVCache, all of the same size and type;
        pos: the cache's n_past). The batch is cut into ubatches as libllama cuts it (split_equal: consecutive
        seq ids, equal token counts; docs/engine.md "Several sequences in one decode") and every ubatch's rows are
        computed together, so each row has the bits libllama gives it in that batch. outputs: per item whether
        its last token's logits are wanted (default all). Returns per item a float32[n_vocab] copy of those
        logits, or None. Refuses before touching any cache: PositionMismatch, ContextFull, InvalidToken,
        ValueError (no items, a repeated seq_id or cache, caches of different sizes or types, more items than
        n_ubatch), NotImplementedError (a graph other than llama's, qwen3's and Gemma 3's). A model with
        sliding-window layers (Gemma 3) places each sequence in its cache's base and SWA parts as
        llama_kv_cache_iswa does with one stream per sequence."""
        items = list(items)
        outputs = [True] * len(items) if outputs is None else [bool(o) for o in outputs]
        if not items or len(outputs) != len(items):
            raise ValueError("decode_batch needs one or more (seq_id, cache, tokens, pos) items and one output "
                             "flag per item")
        if self._fwd.arch not in MULTI_SEQ_ARCHS:
            raise NotImplementedError(f"several sequences in one decode of a {self._fwd.arch} model are not "
                                      "reproduced by bankml yet (only the llama, qwen3 and gemma3 graphs gather "
                                      "several streams)")
        if len(items) > self.n_ubatch:
            raise ValueError(f"{len(items)} sequences in one decode: at most n_ubatch ({self.n_ubatch})")
        seq_ids, caches, arrays, positions = [], [], [], []
        for seq_id, cache, tokens, pos in items:
            if not 0 <= int(seq_id) < 256:
                raise ValueError(f"seq_id {seq_id}: 0 .. 255 (LLAMA_MAX_SEQ)")
            seq_ids.append(int(seq_id))
            caches.append(cache)
            arrays.append(self._checked(tokens, pos, cache))
            positions.append(int(pos))
        if len(set(seq_ids)) != len(seq_ids) or len({id(c) for c in caches}) != len(caches):
            raise ValueError("each sequence of a decode has its own seq_id and its own cache")
        if len({(c.n_ctx, c.cache_type) for c in caches}) != 1:
            raise ValueError("the caches of one decode must have the same size and type (libllama's streams do)")
        rc, rows, who = self._fwd.decode_seqs([c._c for c in caches], seq_ids, arrays, positions, outputs)
        self.check_file()
        if rc == 2:
            raise ContextFull(caches[0].n_past, int(arrays[0].size), caches[0].n_ctx)
        if rc != 0:
            raise RuntimeError(f"the forward pass failed with status {rc}")
        result: list[np.ndarray | None] = [None] * len(items)
        for row, i in zip(rows, who):
            result[int(i)] = row.copy()
        return result

    def new_unified_cache(self, n_ctx: int | None = None, cache_type: str | None = None,
                          n_seq_max: int = 1) -> UnifiedCache:
        """A unified KV cache (llama-server -kvu / -np auto) of n_ctx cells (<= the model's n_ctx) over these
        weights. The llama, qwen3 and gemma3 graphs only (UNIFIED_ARCHS; NotImplementedError otherwise).
        n_seq_max: the sequences it serves (-np), which size a sliding-window cache (UnifiedCache)."""
        if self._fwd.arch not in UNIFIED_ARCHS:
            raise NotImplementedError(f"a unified KV cache for a {self._fwd.arch} model is not reproduced by bankml "
                                      "yet (only the llama and qwen3 graphs)")
        n = self.n_ctx if n_ctx is None else pad_ctx(n_ctx)
        if n <= 0 or n > self.n_ctx:
            raise ValueError(f"a cache of {n} cells: 1 .. {self.n_ctx} (the model's n_ctx)")
        if n_seq_max < 1:
            raise ValueError(f"n_seq_max {n_seq_max}: at least 1")
        return UnifiedCache(self, n, cache_type or self.cache.cache_type, n_seq_max)

    def decode_unified(self, cache: UnifiedCache, items, outputs=None) -> list[np.ndarray | None]:
        """One llama_decode over a unified cache, as llama-server's update_slots gathers a step with -kvu or
        -np auto: items, in the batch's order, are (seq_id, tokens, pos) (seq_id: the slot id; pos: the
        sequence's next position, cache.n_past(seq_id)). The batch is cut as libllama cuts it for one stream
        (split_simple: n_ubatch tokens at a time in batch order, sequences mixed), each ubatch's tokens take the
        cells llama_kv_cache::find_slot gives them, and each row attends to its own sequence's cells (docs/engine.md
        "A unified cache"), so every row has the bits libllama gives it in that batch. outputs: per item whether its
        last token's logits are wanted (default all). Returns per item a float32[n_vocab] copy, or None. Refuses
        before touching the cache: PositionMismatch, ContextFull (no free cells for the batch), InvalidToken,
        ValueError (no items, a repeated seq_id, seq_id outside 0 .. 255, an empty item)."""
        items = list(items)
        outputs = [True] * len(items) if outputs is None else [bool(o) for o in outputs]
        if len(outputs) != len(items):
            raise ValueError("decode_unified needs one output flag per item")
        toks, poss, seqs = self._unified_items(cache, items)
        outs = []
        for arr, out in zip(toks, outputs):
            flags = np.zeros(arr.size, dtype=np.int8)
            flags[-1] = 1 if out else 0
            outs.append(flags)
        n = sum(t.size for t in toks)
        rc, rows = self._fwd.decode_unified(cache._c, np.concatenate(toks), np.concatenate(poss),
                                            np.concatenate(seqs), np.concatenate(outs))
        self._unified_status(rc, cache, n)
        result: list[np.ndarray | None] = [None] * len(items)
        it = iter(rows)
        for i, out in enumerate(outputs):
            if out:
                result[i] = next(it).copy()
        return result

    def _unified_items(self, cache: UnifiedCache, items: list) -> tuple[list, list, list]:
        """decode_unified's checks of (seq_id, tokens, pos) items: per item its int32 tokens, positions and seq ids."""
        if not isinstance(cache, UnifiedCache):
            raise ValueError("decode_unified needs a UnifiedCache (Model.new_unified_cache)")
        if not items:
            raise ValueError("decode_unified needs one or more (seq_id, tokens, pos) items")
        toks, poss, seqs, seen = [], [], [], set()
        for seq_id, tokens, pos in items:
            seq_id, pos = int(seq_id), int(pos)
            if not 0 <= seq_id < 256:
                raise ValueError(f"seq_id {seq_id}: 0 .. 255 (LLAMA_MAX_SEQ)")
            if seq_id in seen:
                raise ValueError(f"seq_id {seq_id} twice in one decode: one item per sequence")
            seen.add(seq_id)
            arr = np.asarray(tokens)
            if arr.ndim != 1 or arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
                raise ValueError("each item needs a non-empty 1-D sequence of integer token ids")
            bad = (arr < 0) | (arr >= self.n_vocab)
            if bad.any():
                raise InvalidToken(int(arr[np.argmax(bad)]), self.n_vocab)
            if pos != cache.n_past(seq_id):
                raise PositionMismatch(pos, cache.n_past(seq_id))
            k = int(arr.size)
            toks.append(arr.astype(np.int32))
            poss.append(np.arange(pos, pos + k, dtype=np.int32))
            seqs.append(np.full(k, seq_id, dtype=np.int32))
        return toks, poss, seqs

    def _unified_status(self, rc: int, cache: UnifiedCache, n: int) -> None:
        self.check_file()
        if rc == 2:
            raise ContextFull(cache.used, n, cache.n_ctx)
        if rc != 0:
            raise RuntimeError(f"the forward pass failed with status {rc}")

    def embed_unified(self, cache: UnifiedCache, items, pooling: str) -> list[np.ndarray]:
        """One llama_decode with embeddings on over a unified cache, as llama-server's update_slots gathers embedding
        prompts at -np auto or with -kvu: items, in the batch's order, are (seq_id, tokens, pos) as for
        decode_unified. The batch is cut by split_simple (n_ubatch rows at a time in batch order), placed and masked
        as decode_unified places them, every row an output; each ubatch is pooled on its own as build_pooling pools
        a split_simple ubatch: its sequences ranked by seq id (llama_ubatch::seq_idx), mean the MUL_MAT of the
        transposed rows by one column per sequence (1.0f/float(its rows in the ubatch) on them), cls (rank) and
        last the sequence's first and last row there. A sequence in several ubatches keeps its last ubatch's share
        (embd_seq is overwritten). Returns per item what embed_batch returns: its rows ("none"), the pooled
        float32[n_embd] ("mean", "cls", "last"), or float32[1] ("rank": element seq_idx of the ubatch's first
        pooled row, a llama file having no classifier head). Same refusals as decode_unified, before any cell
        changes."""
        if pooling not in ("none", "mean", "cls", "last", "rank"):
            raise ValueError(f"pooling {pooling!r}: one of none, mean, cls, last, rank")
        if self._fwd.arch != "llama":
            raise NotImplementedError(f"embeddings of a {self._fwd.arch} model are not reproduced by bankml yet")
        items = list(items)
        toks, poss, seqs = self._unified_items(cache, items)
        seq = np.concatenate(seqs)
        n = int(seq.size)
        rc, rows = self._fwd.decode_embd_unified(cache._c, np.concatenate(toks), np.concatenate(poss), seq)
        self._unified_status(rc, cache, n)
        starts = np.cumsum([0] + [t.size for t in toks])
        if pooling == "none":
            return [rows[starts[i]:starts[i + 1]].copy() for i in range(len(items))]
        item_of = {int(s[0]): i for i, s in enumerate(seqs)}
        pooled: list[np.ndarray | None] = [None] * len(items)
        for u0 in range(0, n, self.n_ubatch):
            useq = seq[u0:u0 + self.n_ubatch]
            urows = rows[u0:u0 + self.n_ubatch]
            ids = sorted({int(s) for s in useq})                    # seq_id_unq: ascending
            idx = {s: k for k, s in enumerate(ids)}                 # seq_idx
            if pooling == "mean":
                vecs = _forward.pool_mean_rows(urows, np.array([idx[int(s)] for s in useq], dtype=np.int32),
                                               len(ids))
            else:
                # cls / rank: the sequence's row at its smallest position in the ubatch, last: at its largest
                at = [np.flatnonzero(useq == s) for s in ids]
                vecs = urows[[r[-1] if pooling == "last" else r[0] for r in at]]
            for s in ids:
                k = idx[s]
                if pooling == "rank":
                    pooled[item_of[s]] = np.array(vecs.reshape(-1)[k:k + 1], dtype=np.float32)
                else:
                    pooled[item_of[s]] = np.array(vecs[k], dtype=np.float32)
        return pooled

    def embed(self, tokens, pos: int, cache: KVCache | None = None) -> np.ndarray:
        """One llama_decode with embeddings on (llama_set_embeddings(ctx, true)): every token is an output, its
        K and V enter the cache as decode's do, and the result is float32[len][n_embd], each token's final norm
        output (llama.cpp's t_embd, what llama_get_embeddings_ith reads with pooling none). No logits are
        computed (logits() is stale after it). Same checks and errors as decode."""
        if self._fwd.arch != "llama":
            # only forward_llama.c writes t_embd for every token; the other graphs leave the buffer untouched
            raise NotImplementedError(f"embeddings of a {self._fwd.arch} model are not reproduced by bankml yet")
        cache = cache or self.cache
        arr = self._checked(tokens, pos, cache)
        rc, rows = self._fwd.decode_embd(cache._c, arr.astype(np.int32), pos)
        self._status(rc, cache, arr)
        return rows

    def embed_batch(self, items, pooling: str) -> list[np.ndarray]:
        """One llama_decode with embeddings on holding several sequences, as llama-server's update_slots gathers
        embedding prompts on a split KV cache (-np N without -kvu): items, in the batch's order, are (seq_id, cache,
        tokens, pos) as for decode_batch. The batch is cut into ubatches by split_equal (sequential, as
        decode_batch cuts it) and each ubatch is pooled as build_pooling pools it (src/llama-graph.cpp), so a
        sequence that spans several ubatches gets its last ubatch's share pooled (libllama's embd_seq keeps the
        last one). Returns per item what llama_get_embeddings_seq / _ith give: pooling "none" its rows
        (float32[n][n_embd]); "mean", "cls", "last" the pooled float32[n_embd]; "rank" float32[1], the n_cls_out
        (1) floats at the sequence's index in its last ubatch of the pooled output (element s of the ubatch's first
        pooled row: a llama file has no classifier head). Same refusals as decode_batch, before any cache
        changes."""
        if pooling not in ("none", "mean", "cls", "last", "rank"):
            raise ValueError(f"pooling {pooling!r}: one of none, mean, cls, last, rank")
        if self._fwd.arch != "llama":
            raise NotImplementedError(f"embeddings of a {self._fwd.arch} model are not reproduced by bankml yet")
        items = [(int(s), c, self._checked(t, p, c), int(p)) for s, c, t, p in items]
        if not items or len(items) > self.n_ubatch:
            raise ValueError(f"{len(items)} sequences in one decode: 1 .. n_ubatch ({self.n_ubatch})")
        if any(not 0 <= s < 256 for s, _, _, _ in items) or len({s for s, _, _, _ in items}) != len(items) \
                or len({id(c) for _, c, _, _ in items}) != len(items):
            raise ValueError("each sequence of a decode has its own seq_id (0 .. 255) and its own cache")
        if any(c.has_swa for _, c, _, _ in items):
            raise NotImplementedError("several sequences in one decode over a sliding-window cache")
        if len({(c.n_ctx, c.cache_type) for _, c, _, _ in items}) != 1:
            raise ValueError("the caches of one decode must have the same size and type (libllama's streams do)")
        rows = [[] for _ in items]
        pooled: list[np.ndarray | None] = [None] * len(items)
        for members, nst in split_equal([(s, t.size) for s, _, t, _ in items], self.n_ubatch):
            taken = [sum(r.shape[0] for r in rows[i]) for i in members]
            tokens = np.concatenate([items[i][2][k:k + nst] for i, k in zip(members, taken)]).astype(np.int32)
            rc, out = self._fwd.decode_embd_streams([items[i][1]._c for i in members], tokens, nst,
                                                    [items[i][3] + k for i, k in zip(members, taken)])
            self.check_file()
            if rc == 2:
                raise ContextFull(items[members[0]][1].n_past, nst, items[members[0]][1].n_ctx)
            if rc != 0:
                raise RuntimeError(f"the forward pass failed with status {rc}")
            for s, i in enumerate(members):
                rows[i].append(out[s * nst:(s + 1) * nst])
            if pooling == "mean":
                vecs = _forward.pool_mean_ubatch(out, len(members))
            elif pooling == "last":
                vecs = out[nst - 1::nst]
            elif pooling != "none":
                vecs = out[0::nst]                  # cls, rank: each sequence's first row in the ubatch
            for s, i in enumerate(members):
                if pooling == "rank":
                    pooled[i] = np.array(vecs.reshape(-1)[s:s + 1], dtype=np.float32)
                elif pooling != "none":
                    pooled[i] = np.array(vecs[s], dtype=np.float32)
        if pooling == "none":
            return [np.concatenate(r) for r in rows]
        return pooled

    @staticmethod
    def pool(rows: np.ndarray, pooling: str) -> np.ndarray:
        """The sequence embedding of one ubatch's rows as build_pooling makes it (src/llama-graph.cpp): "mean"
        (MUL_MAT by 1/n, ggml's vec_dot_f32 order), "cls" and "rank" (the first token's row: a llama file has no
        classifier head, so rank's score is its element 0), "last" (the last token's row)."""
        if pooling == "mean":
            return _forward.pool_mean(rows)
        if pooling in ("cls", "rank"):
            return np.array(rows[0], dtype=np.float32)
        if pooling == "last":
            return np.array(rows[-1], dtype=np.float32)
        raise ValueError(f"pooling {pooling!r}: one of mean, cls, last, rank")

    @staticmethod
    def normalize(vec: np.ndarray, mode: int) -> np.ndarray:
        """common_embd_normalize (common/common.cpp): -1 none, 0 max-abs scaled to int16, 2 euclidean, p p-norm."""
        return _forward.embd_normalize(vec, mode)

    def _checked(self, tokens, pos: int, cache: KVCache) -> np.ndarray:
        arr = np.asarray(tokens)
        if arr.ndim != 1 or arr.size == 0:
            raise ValueError("decode needs a non-empty 1-D sequence of token ids")
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"token ids must be integers, got {arr.dtype}")
        bad = (arr < 0) | (arr >= self.n_vocab)
        if bad.any():
            raise InvalidToken(int(arr[np.argmax(bad)]), self.n_vocab)
        n_past = cache.n_past
        if pos != n_past:
            raise PositionMismatch(pos, n_past)
        if pos + arr.size > cache.n_ctx:
            raise ContextFull(n_past, int(arr.size), cache.n_ctx)
        return arr

    def _status(self, rc: int, cache: KVCache, arr: np.ndarray) -> None:
        self.check_file()               # the file cut under the map: these results are garbage
        if rc == 2:
            raise ContextFull(cache.n_past, int(arr.size), cache.n_ctx)
        if rc != 0:
            raise RuntimeError(f"the forward pass failed with status {rc}")

    @property
    def multi_choice_blockers(self) -> list[str]:
        """The weight types (sorted) whose several-column products differ from their one-column ones, so that
        n > 1 choices decoded one sequence at a time would not give llama-server's bits; empty when none."""
        return sorted(self.weight_types - MULTI_CHOICE_WEIGHTS)

    @property
    def supports_multi_choice(self) -> bool:
        """Whether n > 1 choices (llama-server's multi-sequence steps) are reproduced on this model's weights."""
        return not self.multi_choice_blockers

    def logits(self) -> np.ndarray:
        """float32[n_vocab]: the raw logits of the last decoded token. A view of the engine's buffer, valid until
        the next decode() (copy it to keep it)."""
        return self._fwd.logits_view()

    def check_file(self) -> None:
        """Raise ModelFileChanged when the file was cut under the map since it was opened (see decode)."""
        if self._file is not None:
            self._file.check_mapping()

    def truncate(self, n: int, cache: KVCache | None = None) -> None:
        """Drop every cached position >= n (llama_memory_seq_rm(seq, n, -1))."""
        (cache or self.cache).truncate(n)

    def context_shift(self, n_keep: int, n_discard: int, cache: KVCache | None = None) -> None:
        """llama-server's context shift of a sequence: KVCache.shift."""
        (cache or self.cache).shift(n_keep, n_discard)

    def close(self) -> None:
        self._fwd = None
        self.cache = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
