"""The loaded server: model, tokenizer, chat templates, slots and the facts /props and /v1/models report
(llama-server's server_context and server_context_meta, tools/server/server-context.cpp).

    ctx = ServerContext.load(cfg)        # cfg: bankml.server.flags.ServerConfig; verifies and opens the model
    ctx.model, ctx.tokenizer, ctx.templates, ctx.slots, ctx.n_ctx_slot, ctx.meta

Sizes as llama-server makes them: -np -1 ("auto") is 4 slots with a unified KV pool; llama_context pads n_ctx
up to 256; with a unified pool every slot may use all of it, otherwise each sequence gets pad256(n_ctx / n_slots);
a slot's context is that, capped by the model's training context (n_ctx_slot()). bankml gives every slot its
own KV cache of n_ctx_slot cells (bankml.engine.KVCache).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field

from .. import sampling
from ..engine import pad_ctx
from .http import Refusal

log = logging.getLogger("bankml.server")

#: llama_ftype_name (src/llama-model-loader.cpp) of llama.h's LLAMA_FTYPE_* values, b11192; any other is
#: "unknown, may not work" as there
FTYPE_NAMES = {0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K - Medium",
               11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large", 14: "Q4_K - Small",
               15: "Q4_K - Medium", 16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K",
               19: "IQ2_XXS - 2.0625 bpw", 20: "IQ2_XS - 2.3125 bpw", 21: "Q2_K - Small", 22: "IQ3_XS - 3.3 bpw",
               23: "IQ3_XXS - 3.0625 bpw", 24: "IQ1_S - 1.5625 bpw", 25: "IQ4_NL - 4.5 bpw", 26: "IQ3_S - 3.4375 bpw",
               27: "IQ3_S mix - 3.66 bpw", 28: "IQ2_S - 2.5 bpw", 29: "IQ2_M - 2.7 bpw", 30: "IQ4_XS - 4.25 bpw",
               31: "IQ1_M - 1.75 bpw", 32: "BF16", 36: "TQ1_0 - 1.69 bpw ternary", 37: "TQ2_0 - 2.06 bpw ternary",
               38: "MXFP4 MoE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0"}

#: llama_vocab_type of tokenizer.ggml.model
VOCAB_TYPES = {"no_vocab": 0, "none": 0, "llama": 1, "gpt2": 2, "bert": 3, "t5": 4, "rwkv": 5, "plamo2": 6}


def slot_context(n_ctx: int, n_parallel: int, kv_unified: bool, n_ctx_train: int) -> tuple[int, int, bool]:
    """(n_slots, n_ctx_slot, kv_unified) as llama-server and llama_context work them out."""
    if n_parallel < 0:
        n_parallel, kv_unified = 4, True
    if n_ctx == 0:
        n_ctx = n_ctx_train
    n_ctx = pad_ctx(n_ctx)
    n_ctx_seq = n_ctx if kv_unified else pad_ctx(n_ctx // n_parallel)
    return n_parallel, min(n_ctx_seq, n_ctx_train), kv_unified


@dataclass
class ModelMeta:
    """server_context_meta's model facts."""
    name: str
    aliases: list[str]
    path: str
    vocab_type: int
    n_vocab: int
    n_ctx_train: int
    n_embd: int
    n_params: int
    size: int
    ftype: str
    bos_token: str
    eos_token: str
    build_info: str = "b0-unknown"
    tags: list[str] = field(default_factory=list)


def model_meta(cfg, path: str, header, tok) -> ModelMeta:
    if cfg.aliases:
        name = sorted(cfg.aliases)[0]
    elif cfg.model:
        name = cfg.model
    else:
        name = os.path.basename(path)
    ft = header.get("general.file_type")
    ftype = FTYPE_NAMES.get(ft, "unknown, may not work") if ft is not None else "(guessed) unknown"
    arch = header.architecture
    piece = lambda i: tok.token_to_piece(i, True).decode("utf-8", "replace") if i is not None and i >= 0 else ""
    return ModelMeta(
        name=name, aliases=sorted(cfg.aliases) if cfg.aliases else [name], path=path,
        vocab_type=VOCAB_TYPES.get(header.get("tokenizer.ggml.model", "none"), 0), n_vocab=tok.n_vocab,
        n_ctx_train=int(header.get(f"{arch}.context_length", 0)),
        n_embd=int(header.get(f"{arch}.embedding_length", 0)),
        n_params=sum(t.n_elements for t in header.tensors.values()),
        size=sum(t.nbytes for t in header.tensors.values()),
        ftype=ftype, bos_token=piece(tok.bos_id), eos_token=piece(tok.eos_id), tags=sorted(cfg.tags))


class ServerContext:
    """Everything a request needs. Build with `ServerContext.load(cfg)`."""

    def __init__(self, cfg, path: str, model, tokenizer, templates, header):
        from ..chat.request import ServerChatOptions

        self.cfg = cfg
        self.path = path
        self.model = model
        self.tokenizer = tokenizer
        self.templates = templates
        self.header = header
        self.chat_options = ServerChatOptions(use_jinja=cfg.use_jinja)
        self.n_slots, self.n_ctx_slot, self.kv_unified = slot_context(
            cfg.n_ctx, cfg.n_parallel, cfg.kv_unified, model.n_ctx_train)
        self.meta = model_meta(cfg, path, header, tokenizer)
        self.t_start_us = int(time.monotonic() * 1e6)
        self.lock = threading.Lock()
        self.slots = None            # bankml.server.slots.SlotPool, made by start()
        self.worker = None           # bankml.server.worker.Worker, made by start()
        marker = os.environ.get("LLAMA_MEDIA_MARKER")
        if not marker:
            from .api.info import random_string
            marker = "<__media_" + random_string(32) + "__>"
        self.media_marker = marker
        self.sampling_defaults = _sampling_defaults(cfg, header, tokenizer)
        self._base_gp = None         # base_generation_prompt(), once asked
        # server_context's n_swa: the model's sliding window, 0 without one or with --swa-full; context
        # checkpoints are made when it is set and --ctx-checkpoints > 0 (a llama model's cache can always be
        # truncated: llama-server makes none for it)
        self.n_swa = 0 if (cfg.swa_full or not model.cache.has_swa) else int(model.hparams.extra.get("n_swa", 0))
        self.checkpoints_on = cfg.n_ctx_checkpoints > 0 and self.n_swa > 0

    def default_params_json(self) -> dict:
        """task_params::to_json(true) of the server's defaults (/props default_generation_settings.params)."""
        body = sampling.from_request({}, self.sampling_defaults, self.tokenizer).to_json(True)
        # get_res_props serialises a fresh task_params (only its sampling part is the server's): its
        # reasoning_format is the struct's default, "none", not the request default "deepseek"
        body["reasoning_format"] = "none"
        return body

    @classmethod
    def load(cls, cfg, progress=None, path: str | None = None) -> "ServerContext":
        """Resolve the model (`path`, else -m, else bankml's default model pulled when missing), verify and open
        it."""
        from ..models import pull
        from ..engine import Model
        from ..models.gguf import read_header_file
        from ..tokenizer import Tokenizer

        if path is None:
            path = cfg.model if cfg.model else str(pull.ensure(progress=progress))
        header = read_header_file(path)
        tok = Tokenizer.from_gguf(header)
        templates = _templates(cfg, header)
        arch = header.architecture
        from ..models.arch import ARCHITECTURES
        from ..errors import ModelRefused
        desc = ARCHITECTURES.get(arch)
        if arch in UNSERVED:
            raise ModelRefused(path, [f"serving a {arch} model is not reproduced by bankml yet: {UNSERVED[arch]}"])
        if desc is not None and desc.swa != "none":
            # llama-server's serving of sliding-window layers (context checkpoints, the pos_min rule, --swa-full)
            # is reproduced with a KV cache per slot (-np N without -kvu) and on a unified one (-kvu, -np auto),
            # several slots batched by bankml.server.batching; what is not is refused by name (ModelRefused:
            # bankml-serve exits with the reason)
            why = _swa_refusal(cfg, arch)
            if why:
                raise ModelRefused(path, [why])
        n_ctx_train = int(header.get(f"{arch}.context_length", 0) or 0)
        _, n_ctx_slot, _ = slot_context(cfg.n_ctx, cfg.n_parallel, cfg.kv_unified, n_ctx_train or 1 << 30)
        cache_type = cfg.cache_type_k
        model = Model.open(path, n_ctx=n_ctx_slot, oracle_threads=cfg.oracle_threads, cache_type=cache_type,
                           progress=progress, n_batch=cfg.n_batch, n_ubatch=cfg.n_ubatch, swa_full=cfg.swa_full)
        return cls(cfg, path, model, tok, templates, header)

    def start(self) -> None:
        """The slots and the worker thread (once)."""
        from .worker import Worker
        from .slots import SlotPool
        if self.slots is None:
            self.slots = SlotPool(self)
        if self.worker is None:
            self.worker = Worker(self)

    def base_generation_prompt(self) -> str:
        """The generation prompt of a plain conversation (the assistant header the chat parser consumes)."""
        if self._base_gp is None:
            from ..chat.request import parse_chat_request
            req = parse_chat_request({"messages": [{"role": "user", "content": "x"}]}, self.templates,
                                     self.chat_options)
            self._base_gp = req.chat.generation_prompt
        return self._base_gp

    def snapshot(self) -> dict:
        """What this model answers while it sleeps (llama-server's cached responses): /props (is_sleeping true)
        and /models as they are now."""
        from .api.info import models_body, props_body
        return {"props": dict(props_body(self), is_sleeping=True), "models": models_body(self)}

    def model_info(self) -> dict:
        """This model's /v1/models entry (its "meta" is what llama-server's router merges into /models)."""
        from .api.info import model_info
        return model_info(self)

    def adopt_metrics(self, metrics) -> None:
        """Carry the /metrics counters of this model's previous context (a wake from sleep)."""
        metrics.pool = self.slots
        self.slots.metrics = metrics

    def close(self) -> None:
        """Stop the worker and free the model: its mapping, its KV caches, the slots and the host prompt cache."""
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
        self.slots = None
        if self.model is not None:
            self.model.close()
            self.model = None

    @property
    def n_batch(self) -> int:
        """Effective n_batch: min(-b, n_ctx) as llama_context makes it."""
        return min(self.cfg.n_batch, self.model.n_ctx)


# architectures the engine computes whose serving is not verified (no llama-server answers of such a model are
# recorded): bankml-serve refuses the file by name, with the reason. None today: llama (tests/oracle/server/),
# gemma3 (gemma3.json) and qwen3 (qwen3.json) are served.
UNSERVED: dict[str, str] = {}


def _swa_refusal(cfg, arch: str) -> str | None:
    """Why bankml-serve cannot serve a model with sliding-window layers under these flags (None: it can)."""
    if cfg.ctx_shift:
        return (f"--context-shift on a {arch} model (sliding-window layers) is not reproduced by bankml yet")
    if cfg.cache_type_k != "f16":
        return f"a {cfg.cache_type_k} KV cache for a {arch} model (sliding-window layers): only f16 is reproduced"
    return None


def _sampling_defaults(cfg, header, tok):
    """bankml.sampling's Defaults with the command line's sampling flags."""
    return sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids, n_predict=cfg.n_predict,
                                       n_parallel=max(cfg.n_parallel, 1) if cfg.n_parallel > 0 else 4,
                                       sse_ping_interval=cfg.sse_ping_interval, verbosity=cfg.log_verbosity,
                                       **cfg.sampling)


def _templates(cfg, header):
    """common_chat_templates_init with --chat-template(-file): the text is parsed as Jinja in either mode (the
    legacy path reads only its source); under --jinja an override must render a "test" message
    (common_chat_verify_template), else llama-server exits. Under --no-jinja at a log verbosity of 4 or more,
    llama-server formats an example chat at load (its trace line) and stops when the template selects no
    built-in one."""
    from ..chat.template import ChatTemplates, TemplateError
    from ..chat.legacy import verify
    override = cfg.chat_template or None
    try:
        templates = ChatTemplates.from_gguf(header, override=override)
        if override is not None and cfg.use_jinja:
            templates.startup_check()
    except TemplateError as e:
        raise _not_served(f"the chat template cannot be used: {e.message}") from None
    if not cfg.use_jinja and cfg.log_verbosity >= 4 and not verify(templates.source()):
        raise _not_served("chat template parsing error: this custom template is not supported, try using --jinja")
    return templates


def _not_served(message: str) -> Refusal:
    """A server setting bankml cannot serve (bankml-serve exits 1 with the message)."""
    return Refusal(501, message, "not_supported_error")
