"""A loaded model and its forward pass: llama.cpp b11192's llama graph on the CPU, bit for bit.

Owns: the hyper-parameters read from the GGUF header (as llama.cpp's loader reads them), the weights as views
into the file's mmap, the KV caches, the calls into the compiled forward pass (bankml.engine._forward).
Must not know: tokenizers, templates, sampling, HTTP. Mirrors: src/llama-model.cpp (hparams), src/models/llama.cpp
(graph), src/llama-context.cpp (decode: ubatches, outputs), src/llama-kv-cache.cpp (cells).

    model = Model.open(path, n_ctx=4096, n_threads=None, oracle_threads=2)
    model.decode(tokens, pos)      # one llama_decode: logits of the last token
    row = model.logits()           # float32[n_vocab] view, valid until the next decode
    model.truncate(n)              # llama_memory_seq_rm(seq, n, -1)
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

import numpy as np

from ..models import gguf, verify
from ..errors import ContextFull, InvalidToken, ModelRefused, PositionMismatch
from . import _forward
from ._threads import effective_threads

KV_PAD = 256          # llama_context pads n_ctx (and so the cache) to 256 cells
N_UBATCH = 512        # llama-server's default --ubatch-size
N_BATCH = 2048        # llama-server's default --batch-size (the server cuts prompts into calls of this size)
CACHE_TYPES = ("f16", "q8_0")


def pad_ctx(n: int) -> int:
    """n rounded up to a multiple of KV_PAD, as llama_context pads n_ctx."""
    return -(-n // KV_PAD) * KV_PAD


# weight types whose matrix products give every column the bits of a one-column product, measured against
# llama-server's n > 1 steps (one product over every live choice's column; bankml decodes each choice alone).
# F16 differs: ggml takes another kernel for several columns.
MULTI_CHOICE_WEIGHTS = frozenset({"Q4_1", "Q8_0"})


@dataclass(frozen=True)
class HParams:
    """What the graph needs from the header (llama.cpp's names in comments)."""

    arch: str
    n_embd: int          # embedding_length
    n_layer: int         # block_count
    n_head: int          # attention.head_count
    n_head_kv: int       # attention.head_count_kv (default n_head)
    head_dim: int        # attention.key_length (default n_embd / n_head)
    n_rot: int           # rope.dimension_count (default head_dim)
    n_ff: int            # feed_forward_length
    n_vocab: int         # vocab_size, or the number of tokens
    n_ctx_train: int     # context_length
    rms_eps: float       # attention.layer_norm_rms_epsilon
    rope_freq_base: float  # rope.freq_base (default 10000)
    tied_output: bool    # no output.weight: the head is token_embd

    @property
    def kq_scale(self) -> float:
        return float(np.float32(1.0) / np.sqrt(np.float32(self.head_dim)))


def _hparams(h: gguf.GGUFHeader) -> HParams:
    arch = h.architecture
    n_embd = int(h.arch_key("embedding_length"))
    n_head = int(h.arch_key("attention.head_count"))
    head_dim = int(h.arch_key("attention.key_length", n_embd // n_head))
    n_vocab = h.arch_key("vocab_size")
    if n_vocab is None:
        n_vocab = len(h.get("tokenizer.ggml.tokens", []))
    return HParams(
        arch=arch, n_embd=n_embd, n_layer=int(h.arch_key("block_count")), n_head=n_head,
        n_head_kv=int(h.arch_key("attention.head_count_kv", n_head)), head_dim=head_dim,
        n_rot=int(h.arch_key("rope.dimension_count", head_dim)), n_ff=int(h.arch_key("feed_forward_length")),
        n_vocab=int(n_vocab), n_ctx_train=int(h.arch_key("context_length")),
        rms_eps=float(h.arch_key("attention.layer_norm_rms_epsilon")),
        rope_freq_base=float(h.arch_key("rope.freq_base", 10000.0)),
        tied_output="output.weight" not in h.tensors)


def _check_graph(path: str, hp: HParams) -> None:
    """What the llama graph asserts (src/models/llama.cpp) and what the kernels need, as refusals."""
    why = []
    if hp.arch != "llama":
        why.append(f"architecture {hp.arch!r}: the engine runs the llama graph only")
    if hp.n_head % hp.n_head_kv:
        why.append(f"{hp.n_head} heads are not a multiple of {hp.n_head_kv} KV heads")
    if hp.n_rot != hp.head_dim:
        why.append(f"rope.dimension_count {hp.n_rot} differs from the head size {hp.head_dim} (llama.cpp asserts)")
    if hp.head_dim % 2:
        why.append(f"head size {hp.head_dim} is odd")
    if why:
        raise ModelRefused(path, why)


def _matrix(f: gguf.GGUFFile, name: str):
    ti = f.tensors[name]
    k = ti.shape[0]
    m = ti.n_elements // k
    return (f.tensor_bytes(name), int(ti.type), int(k), int(m), gguf.row_bytes(ti.type, k))


def _vector(f: gguf.GGUFFile, name: str) -> np.ndarray:
    return f.tensor(name)


class KVCache:
    """One sequence's KV cache (llama-server: one slot's cells): n_ctx cells (a multiple of 256) of K and V for
    every layer, F16 or Q8_0. The cache holds positions 0 .. n_past-1 (cell == position)."""

    def __init__(self, model: "Model", n_ctx: int, cache_type: str = "f16"):
        if cache_type not in CACHE_TYPES:
            raise ValueError(f"cache type {cache_type!r} is not one of {', '.join(CACHE_TYPES)}")
        self.n_ctx = n_ctx
        self.cache_type = cache_type
        self._c = _forward._KVCache(model._llama, n_ctx, cache_type)

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

    def state_size(self, n_cells: int = 1) -> int:
        """Bytes of save() for n_cells positions (K and V rows of every layer)."""
        return n_cells * self._c.cell_bytes

    def save(self) -> bytes:
        """The cache's positions 0 .. n_past-1 (K and V rows of every layer), for restore()."""
        return self._c.state_bytes(self.n_past)

    def restore(self, state: bytes) -> None:
        """Replace the contents with a save() of a cache of the same model and type."""
        row = self.state_size(1)
        if len(state) % row:
            raise ValueError(f"{len(state)} bytes are not a saved state of this cache")
        n = len(state) // row
        if n > self.n_ctx:
            raise ContextFull(0, n, self.n_ctx)
        self._c.load_state(state, n)


class Model:
    """A verified GGUF model and its forward pass. Open with `Model.open`."""

    def __init__(self, path: str, file: gguf.GGUFFile, hp: HParams, n_ctx: int, n_threads: int,
                 oracle_threads: int, cache_type: str, n_ubatch: int, regroup: bool = True):
        self.path = path
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
        f = file
        layers = []
        for i in range(hp.n_layer):
            b = f"blk.{i}."
            layers.append({
                "attn_norm": _vector(f, b + "attn_norm.weight"), "ffn_norm": _vector(f, b + "ffn_norm.weight"),
                "wq": _matrix(f, b + "attn_q.weight"), "wk": _matrix(f, b + "attn_k.weight"),
                "wv": _matrix(f, b + "attn_v.weight"), "wo": _matrix(f, b + "attn_output.weight"),
                "gate": _matrix(f, b + "ffn_gate.weight"), "up": _matrix(f, b + "ffn_up.weight"),
                "down": _matrix(f, b + "ffn_down.weight")})
        weights = {
            "tok_embd": _matrix(f, "token_embd.weight"),
            "output_norm": _vector(f, "output_norm.weight"),
            "output": _matrix(f, "token_embd.weight" if hp.tied_output else "output.weight"),
            "layers": layers,
        }
        config = {"n_embd": hp.n_embd, "n_layer": hp.n_layer, "n_head": hp.n_head, "n_head_kv": hp.n_head_kv,
                  "head_dim": hp.head_dim, "n_rot": hp.n_rot, "n_ff": hp.n_ff, "n_vocab": hp.n_vocab,
                  "rms_eps": hp.rms_eps, "rope_freq_base": hp.rope_freq_base, "kq_scale": hp.kq_scale}
        self._llama = _forward._Forward(hp.arch, config, weights, n_ubatch, n_ctx, n_threads, oracle_threads, regroup)
        if regroup:
            # the Q4_1 / Q8_0 matrices now live in their regrouped copies: the file's pages need not stay
            # resident (the norms and the embedding rows are faulted back in as they are read)
            try:
                f.buffer().madvise(mmap.MADV_DONTNEED)
            except (AttributeError, OSError):
                pass
        self.cache = KVCache(self, n_ctx, cache_type)

    @classmethod
    def open(cls, path: str | os.PathLike, n_ctx: int | None = 4096, n_threads: int | None = None,
             oracle_threads: int = 2, cache_type: str = "f16", progress=None, regroup: bool = True,
             n_batch: int | None = None, n_ubatch: int | None = None) -> "Model":
        """Verify (guard + sha256 pin) and map a model. n_ctx: llama-server's -c (None or 0: the model's
        training context), rounded up to 256 as llama.cpp does; n_threads: the threads bankml uses (default:
        OMP_NUM_THREADS or the physical cores); oracle_threads: the -t of the llama-server whose bits are
        reproduced; cache_type: --cache-type-k/v ("f16" or "q8_0", both alike); regroup: copy the Q4_1 / Q8_0
        matrices into bankml's 8-row layout (faster, the same bits; False reads the file's layout); n_batch /
        n_ubatch: llama-server's -b / -ub (decode cuts each call into ubatches of n_ubatch)."""
        path = os.fspath(path)
        verify.verify(path, progress)
        f = gguf.GGUFFile(path)
        try:
            hp = _hparams(f.header)
            _check_graph(path, hp)
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
            return cls(path, f, hp, n_ctx, effective_threads(n_threads), oracle_threads, cache_type, n_ubatch,
                       regroup)
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
        ValueError for an empty call; the cache is unchanged when it raises. multi_stream: these tokens are one
        sequence's share of a llama_decode whose ubatch holds several sequences' streams (llama-server's n > 1
        choices in a non-unified cache); ggml then never takes the split-KV attention path, nor does this."""
        cache = cache or self.cache
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
        rc = self._llama.decode(cache._c, arr.astype(np.int32), pos, multi_stream)
        if rc == 2:
            raise ContextFull(n_past, int(arr.size), cache.n_ctx)
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
        return self._llama.logits_view()

    def truncate(self, n: int, cache: KVCache | None = None) -> None:
        """Drop every cached position >= n (llama_memory_seq_rm(seq, n, -1))."""
        (cache or self.cache).truncate(n)

    def close(self) -> None:
        self._llama = None
        self.cache = None
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
