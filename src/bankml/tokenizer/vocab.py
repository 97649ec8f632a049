"""The vocabulary as llama.cpp b11192 loads it (llama_vocab::impl::load in src/llama-vocab.cpp).

Owns: reading `tokenizer.ggml.*` from a GGUF header and working out everything llama.cpp decides at load time:
the tokenizer family and pre-tokenizer with their flags, the special token ids (defaults, then the GGUF keys),
each token's attributes including the overrides llama.cpp applies by token text (end-of-turn and FIM tokens
made CONTROL, "unused" control tokens, the end-of-generation set, the gpt-oss and Gemma 4 workarounds, the
per-model lstrip/rstrip), the special-token cache and its order, and the piece of every token.
Knows nothing of HTTP or templates; the compiled paths live in `_core`.

Where llama.cpp's choice depends on the C++ standard library (which of two candidate tokens it meets first in
an unordered_map, how std::sort orders special tokens of equal length), `bankml.cxx._stl` reproduces libstdc++.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import TokenizerError, UnsupportedTokenizer
from ..models.gguf import GGUFHeader, ValueType
from ..cxx import _stl as _cxx
from . import _pretok, _unicode
from ._core import pieces_for_cache

log = logging.getLogger(__name__)

NULL = -1

# llama_token_attr
ATTR_UNDEFINED = 0
ATTR_UNKNOWN = 1 << 0
ATTR_UNUSED = 1 << 1
ATTR_NORMAL = 1 << 2
ATTR_CONTROL = 1 << 3
ATTR_USER_DEFINED = 1 << 4
ATTR_BYTE = 1 << 5
ATTR_NORMALIZED = 1 << 6
ATTR_LSTRIP = 1 << 7
ATTR_RSTRIP = 1 << 8
ATTR_SINGLE_WORD = 1 << 9

# llama_token_type (GGUF tokenizer.ggml.token_type) -> attribute
_TYPE_ATTR = {0: ATTR_UNDEFINED, 1: ATTR_NORMAL, 2: ATTR_UNKNOWN, 3: ATTR_CONTROL, 4: ATTR_USER_DEFINED,
              5: ATTR_UNUSED, 6: ATTR_BYTE}



def token_piece(text: str, token_type: int, unescape_spaces: bool) -> bytes:
    """One token's piece as llama.cpp caches it at load (token_to_piece, special=true), from its text and GGUF
    token type alone, with no vocabulary loaded; unescape_spaces: U+2581 is a space (SentencePiece)."""
    attrs = np.array([_TYPE_ATTR.get(int(token_type), 0)], dtype=np.int32)
    return pieces_for_cache([text.encode("utf-8", "surrogateescape")], attrs, unescape_spaces)[0]


# pre-tokenizer types whose regexes bankml implements, as _pretok steps
_S = _pretok.STEPS
_STEPS = {
    "default": [_S["run_punct"], _S["gpt2"], _S["run_number"], _S["ascii_digits3"]],
    "llama3": [_S["llama3"]],
    "gpt2": [_S["gpt2"]],
    "smollm": [_S["each_number"], _S["gpt2"]],
    "qwen2": [_S["qwen2"]],
    "qwen35": [_S["qwen35"]],
}
# llama.cpp pre-tokenizer type -> the regex family above (types that share a regex list)
_FAMILY = {
    "DEFAULT": "default",
    "LLAMA3": "llama3", "DBRX": "llama3", "SMAUG": "llama3", "CHATGLM4": "llama3",
    "GPT2": "gpt2", "MPT": "gpt2", "OLMO": "gpt2", "JAIS": "gpt2", "TRILLION": "gpt2", "GRANITE_DOCLING": "gpt2",
    "STARCODER": "smollm", "REFACT": "smollm", "COMMAND_R": "smollm", "SMOLLM": "smollm", "CODESHELL": "smollm",
    "EXAONE": "smollm", "MINERVA": "smollm", "MELLUM2": "smollm",
    "STABLELM2": "qwen2", "QWEN2": "qwen2", "HUNYUAN": "qwen2", "SOLAR_OPEN": "qwen2", "GROK_2": "qwen2",
    "QWEN35": "qwen35",
}

# tokenizer.ggml.pre -> (llama.cpp pre-tokenizer type, flag changes), as the loader's if-chain sets them
_C = {"clean_spaces": False}
_PRE = {}


def _pre(names, pre_type, **flags):
    for n in names.split():
        _PRE[n] = (pre_type, flags)


_pre("default", "DEFAULT")
_pre("minicpm5", "MINICPM5", ignore_merges=True)
_pre("llama3 llama-v3 llama-bpe falcon3 falcon-h1 pixtral midm-2.0 lfm2 jina-v5-nano", "LLAMA3",
     ignore_merges=True, add_bos=True)
_pre("deepseek-llm", "DEEPSEEK_LLM", **_C)
_pre("deepseek-coder", "DEEPSEEK_CODER", **_C)
_pre("deepseek-v3", "DEEPSEEK3_LLM", **_C)
_pre("spark2_5", "SPARK2_5", **_C)
_pre("youtu", "YOUTU", clean_spaces=False, ignore_merges=True)
_pre("falcon", "FALCON")
_pre("mpt", "MPT")
_pre("starcoder", "STARCODER")
_pre("gpt-2 phi-2 jina-es jina-de gigachat jina-v2-es jina-v2-de a.x-4.0 mellum modern-bert", "GPT2")
_pre("jais-2", "JAIS2")
_pre("gemma4 granite-embed-multi-311m", "GEMMA4", escape_whitespaces=True)
_pre("sarvam-moe", "SARVAM_MOE", escape_whitespaces=True, clean_spaces=False)
_pre("jina-v1-en jina-v2-code roberta-bpe", "GPT2", add_sep=True)
_pre("whitespace", "WHITESPACE")
_pre("refact", "REFACT")
_pre("command-r", "COMMAND_R", **_C)
_pre("qwen2 deepseek-r1-qwen kormo f2llmv2", "QWEN2", **_C)
_pre("qwen35", "QWEN35", **_C)
_pre("stablelm2", "STABLELM2")
_pre("olmo", "OLMO")
_pre("dbrx", "DBRX")
_pre("smaug-bpe", "SMAUG")
_pre("poro-chat", "PORO", **_C)
_pre("glm4 chatglm-bpe", "CHATGLM4", bos=NULL)
_pre("viking", "VIKING", **_C)
_pre("jais", "JAIS")
_pre("tekken", "TEKKEN", clean_spaces=False, ignore_merges=True, add_bos=True)
_pre("smollm", "SMOLLM", **_C)
_pre("codeshell", "CODESHELL")
_pre("bloom", "BLOOM")
_pre("gpt3-finnish", "GPT3_FINNISH")
_pre("exaone", "EXAONE")
_pre("exaone4", "GPT2")
_pre("exaone-moe", "EXAONE_MOE")
_pre("chameleon", "CHAMELEON", add_bos=True, clean_spaces=False)
_pre("minerva-7b", "MINERVA")
_pre("megrez", "QWEN2")
_pre("gpt-4o llama4 kanana2 talkie", "GPT4O", **_C)
_pre("granite-embed-multi-97m", "GRANITE_EMB_MULTI", clean_spaces=False, ignore_merges=True)
_pre("tiny_aya cohere2moe", "TINY_AYA", **_C)
_pre("superbpe", "SUPERBPE", **_C)
_pre("trillion", "TRILLION", **_C)
_pre("granite-docling", "GRANITE_DOCLING", **_C)
_pre("bailingmoe bailingmoe2 llada-moe", "BAILINGMOE", **_C)
_pre("seed-coder", "SEED_CODER", **_C)
_pre("hunyuan", "HUNYUAN", **_C)
_pre("hunyuan-dense", "HUNYUAN_DENSE", **_C)
_pre("hy_v4", "HY_V4", **_C)
_pre("joyai-llm", "JOYAI_LLM", **_C)
_pre("kimi-k2", "KIMI_K2", **_C)
_pre("ufakzeka", "UFAKZEKA", **_C)
_pre("grok-2", "GROK_2", **_C)
_pre("afmoe", "AFMOE", **_C)
_pre("laguna", "LAGUNA", **_C)
_pre("minimax-m2", "MINIMAX_M2", **_C)
_pre("solar-open", "SOLAR_OPEN", **_C)
_pre("mellum2", "MELLUM2")

# special ids read from the GGUF, in the loader's order (the deprecated prefix/suffix/middle keys come last)
_SPECIAL_KEYS = [
    ("bos", "bos_token_id"), ("eos", "eos_token_id"), ("eot", "eot_token_id"), ("eom", "eom_token_id"),
    ("unk", "unknown_token_id"), ("sep", "seperator_token_id"), ("pad", "padding_token_id"),
    ("mask", "mask_token_id"), ("fim_pre", "fim_pre_token_id"), ("fim_suf", "fim_suf_token_id"),
    ("fim_mid", "fim_mid_token_id"), ("fim_pad", "fim_pad_token_id"), ("fim_rep", "fim_rep_token_id"),
    ("fim_sep", "fim_sep_token_id"), ("fim_pre", "prefix_token_id"), ("fim_suf", "suffix_token_id"),
    ("fim_mid", "middle_token_id"),
]

# texts that name a special token when the GGUF does not (the loader takes the first it meets)
_NAMED = {
    "eot": ["<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
            "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"],
    "eom": ["<|eom_id|>"],
    "fim_pre": ["<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
                "<|code_prefix|>", "<|prefix|>"],
    "fim_suf": ["<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
                "<|code_suffix|>", "<|suffix|>"],
    "fim_mid": ["<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
                "<|code_middle|>", "<|middle|>"],
    "fim_pad": ["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
    "fim_rep": ["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"],
    "fim_sep": ["<|file_sep|>"],
}
_NAMED_ORDER = ["eot", "eom", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep"]

# texts that end generation
_EOG_TEXTS = ["<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
              "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
              "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
              "<｜end▁of▁sentence｜>", "[e~["]

_GPT_OSS_USER_DEFINED = ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"]


@dataclass
class Vocab:
    """Everything the loader decides. Texts are bytes (GGUF strings may hold invalid UTF-8)."""

    model: str                        # tokenizer.ggml.model: "gpt2" (BPE) or "llama" (SPM)
    kind: str                         # "bpe" or "spm"
    pre: str                          # tokenizer.ggml.pre as given ("" when absent)
    pre_type: str                     # llama.cpp's pre-tokenizer type (BPE), "DEFAULT" for SPM
    texts: list[bytes]
    scores: np.ndarray                # float32[n]
    attrs: np.ndarray                 # int32[n], final attributes
    merges: list[bytes]
    ids: dict[str, int]               # bos eos eot eom unk sep pad mask fim_* nl, NULL = -1
    add_space_prefix: bool
    add_bos: bool
    add_eos: bool
    add_sep: bool
    ignore_merges: bool
    clean_spaces: bool
    escape_whitespaces: bool
    remove_extra_whitespaces: bool
    eog_ids: list[int]                # sorted
    special_order: list[int]          # the special-token cache, in llama.cpp's order
    pieces: list[bytes]               # token_to_piece(special=True) of every token
    steps: list[int] = field(default_factory=list)   # pre-tokenizer steps (BPE)
    warnings: list[str] = field(default_factory=list)
    core: object = field(default=None, repr=False)   # the compiled tables (_core.Core), once built

    @property
    def n_tokens(self) -> int:
        return len(self.texts)


def _key(header: GGUFHeader, name: str, vtype: ValueType, default):
    """A scalar key of the exact type llama.cpp's loader asks for (any other type fails the load)."""
    if name not in header.metadata:
        return default
    t = header.value_types[name]
    if t != vtype:
        raise TokenizerError(f"{name} is stored as {t.name.lower()}; llama.cpp reads it as {vtype.name.lower()} "
                             "and refuses any other type")
    return header.metadata[name]


def _array(header: GGUFHeader, name: str, etypes: tuple[ValueType, ...]):
    if name not in header.metadata:
        return None
    if header.value_types[name] != ValueType.ARRAY or header.array_types.get(name) not in etypes:
        raise TokenizerError(f"{name} has the wrong GGUF type for llama.cpp's loader")
    return header.metadata[name]


def _b(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def load_vocab(header: GGUFHeader) -> Vocab:
    """Work out the vocabulary of a GGUF header as llama.cpp b11192 does. Raises TokenizerError where llama.cpp
    fails to load, UnsupportedTokenizer where it loads something bankml does not reproduce yet."""
    warnings: list[str] = []
    model = _key(header, "tokenizer.ggml.model", ValueType.STRING, None)
    if model is None:
        raise TokenizerError("tokenizer.ggml.model is missing: no vocabulary to load")
    pre = _key(header, "tokenizer.ggml.pre", ValueType.STRING, "")

    ids = {"bos": 1, "eos": 2, "eot": NULL, "eom": NULL, "unk": 0, "sep": NULL, "pad": NULL, "mask": NULL,
           "fim_pre": NULL, "fim_suf": NULL, "fim_mid": NULL, "fim_pad": NULL, "fim_rep": NULL, "fim_sep": NULL}
    flags = {"add_space_prefix": False, "add_bos": False, "add_eos": False, "add_sep": False,
             "ignore_merges": False, "clean_spaces": False, "escape_whitespaces": True}
    merges: list[bytes] = []
    if model == "llama":
        kind = "spm"
        pre_type = "DEFAULT"
        flags.update(add_space_prefix=True, clean_spaces=False, add_bos=True, add_eos=False)
    elif model == "gpt2":
        kind = "bpe"
        raw_merges = _array(header, "tokenizer.ggml.merges", (ValueType.STRING,))
        if raw_merges is None:
            raise TokenizerError("tokenizer.ggml.merges is missing (a gpt2 tokenizer needs its BPE merges)")
        merges = [_b(m) for m in raw_merges]
        ids.update(bos=11, eos=11, unk=NULL)
        flags.update(add_space_prefix=False, escape_whitespaces=False, clean_spaces=True)
        if pre == "":
            warnings.append("no tokenizer.ggml.pre: the 'default' pre-tokenizer is used")
            pre_type, changes = "DEFAULT", {}
        elif pre in _PRE:
            pre_type, changes = _PRE[pre]
        else:
            raise TokenizerError(f"tokenizer.ggml.pre '{pre}' is not a pre-tokenizer llama.cpp b11192 knows")
        for k, v in changes.items():
            if k == "bos":
                ids["bos"] = v
            else:
                flags[k] = v
        if pre_type not in _FAMILY:
            raise UnsupportedTokenizer(f"pre-tokenizer '{pre}' ({pre_type})",
                                       "its regular expressions are not implemented by bankml's tokenizer yet "
                                       f"(supported: {', '.join(sorted(_supported_pre_names()))})")
    elif model in ("no_vocab", "none", "bert", "t5", "rwkv", "test", "plamo2", "gemma4", "hybriddna", "whitespace"):
        raise UnsupportedTokenizer(f"tokenizer model '{model}'",
                                   "bankml reproduces the 'gpt2' (byte-level BPE) and 'llama' (SentencePiece) "
                                   "tokenizers only")
    else:
        raise TokenizerError(f"tokenizer.ggml.model '{model}' is not a tokenizer llama.cpp b11192 knows")

    flags["add_space_prefix"] = _key(header, "tokenizer.ggml.add_space_prefix", ValueType.BOOL,
                                     flags["add_space_prefix"])
    remove_extra_ws = _key(header, "tokenizer.ggml.remove_extra_whitespaces", ValueType.BOOL, False)

    tokens = _array(header, "tokenizer.ggml.tokens", (ValueType.STRING,))
    if tokens is None:
        raise TokenizerError("tokenizer.ggml.tokens is missing: no vocabulary to load")
    n = len(tokens)
    if n > 0x7FFFFFFF:
        raise TokenizerError(f"{n} tokens do not fit in llama_token")
    if "tokenizer.ggml.scores" in header.metadata:
        scores_raw = _array(header, "tokenizer.ggml.scores", (ValueType.INT32, ValueType.FLOAT32))
        if len(scores_raw) < n:
            raise TokenizerError(f"tokenizer.ggml.scores has {len(scores_raw)} entries for {n} tokens")
        scores = np.asarray(scores_raw[:n], dtype=np.float32)
    else:
        scores = np.zeros(n, dtype=np.float32)
    toktypes = _array(header, "tokenizer.ggml.token_type", (ValueType.INT32,))
    if toktypes is not None and len(toktypes) < n:
        raise TokenizerError(f"tokenizer.ggml.token_type has {len(toktypes)} entries for {n} tokens")

    texts = [t.encode("utf-8", "surrogateescape") for t in tokens]
    for i in (i for i, t in enumerate(texts) if not t):
        warnings.append(f"token {i} has an empty text: it is named [EMPTY_{i}]")
        texts[i] = f"[EMPTY_{i}]".encode()
    if toktypes is None:
        attrs = np.full(n, ATTR_NORMAL, dtype=np.int32)
    else:
        tt = np.asarray(toktypes[:n], dtype=np.int64)
        attrs = np.zeros(n, dtype=np.int32)
        for ty, at in _TYPE_ATTR.items():
            attrs[tt == ty] = at

    v = Vocab(model=model, kind=kind, pre=pre, pre_type=pre_type, texts=texts, scores=scores, attrs=attrs,
              merges=merges, ids=ids, add_space_prefix=flags["add_space_prefix"], add_bos=flags["add_bos"],
              add_eos=flags["add_eos"], add_sep=flags["add_sep"], ignore_merges=flags["ignore_merges"],
              clean_spaces=flags["clean_spaces"], escape_whitespaces=flags["escape_whitespaces"],
              remove_extra_whitespaces=remove_extra_ws, eog_ids=[], special_order=[], pieces=[],
              steps=list(_STEPS[_FAMILY[pre_type]]) if kind == "bpe" else [], warnings=warnings)
    try:
        v.core = build_core(v)
    except ValueError as e:
        if "repeats the text" not in str(e):
            raise
        seen: set[bytes] = set()
        dup = next(t for t in texts if t in seen or seen.add(t))
        raise TokenizerError(f"the vocabulary holds the text {dup!r} twice (llama.cpp aborts on this)") from None
    to_id = _TextIndex(v.core)

    # the newline token (llama.cpp works it out before reading the special ids, with no special tokens yet)
    ids["nl"] = _newline_id(v, to_id)

    for name, key in _SPECIAL_KEYS:
        full = "tokenizer.ggml." + key
        if ids[name] >= 0 and ids[name] >= n:
            warnings.append(f"{full}: the default id {ids[name]} is past the vocabulary; there is none")
            ids[name] = NULL
        new = _key(header, full, ValueType.UINT32, None)
        if new is None:
            continue
        if new >= n:
            warnings.append(f"{full} = {new} is past the vocabulary; {ids[name]} stays")
        else:
            ids[name] = new

    v.add_bos = _key(header, "tokenizer.ggml.add_bos_token", ValueType.BOOL, v.add_bos)
    v.add_eos = _key(header, "tokenizer.ggml.add_eos_token", ValueType.BOOL, v.add_eos)
    v.add_sep = _key(header, "tokenizer.ggml.add_sep_token", ValueType.BOOL, v.add_sep)

    _named_tokens(v, to_id)
    _unused_tokens(v)
    eog = _eog_set(v, to_id)
    v.eog_ids = sorted(eog)

    # the special-token cache: control, user-defined and unknown tokens, longest text first (std::sort)
    special = np.flatnonzero(attrs & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)).tolist()
    v.special_order = _cxx.std_sort(special, lambda i: len(texts[i]))
    try:
        v.pieces = pieces_for_cache(texts, attrs, v.kind == "spm" or v.escape_whitespaces)
    except ValueError as e:
        tok = e.args[0]
        raise TokenizerError(f"token {tok} ({texts[tok]!r}): llama.cpp cannot make its piece (an invalid "
                             "codepoint, or a byte token shorter than '<0x')") from None
    _per_model_attrs(v, header, to_id)
    for w in v.warnings:
        log.warning("%s", w)
    return v


class _TextIndex:
    """token_to_id for the few texts the loader looks up, over the compiled string table."""

    def __init__(self, core):
        self._core = core

    def get(self, text: bytes, default=None):
        t = self._core.text_id(text)
        return default if t < 0 else t

    def __contains__(self, text: bytes) -> bool:
        return self._core.text_id(text) >= 0

    def __getitem__(self, text: bytes) -> int:
        t = self._core.text_id(text)
        if t < 0:
            raise KeyError(text)
        return t


def build_core(v: Vocab):
    """The compiled tables of a vocabulary (special tokens and pieces are set by Core.configure)."""
    from ._core import Core
    return Core(kind=v.kind, texts=v.texts, scores=v.scores, merges=v.merges, steps=v.steps,
                ignore_merges=v.ignore_merges)


def _supported_pre_names() -> list[str]:
    return [name for name, (t, _) in _PRE.items() if t in _FAMILY]


def _newline_id(v: Vocab, to_id: "_TextIndex") -> int:
    if v.kind == "spm":
        t = to_id.get(b"<0x0A>", to_id.get(b"\n"))
        if t is None:
            v.warnings.append("no newline token in this SentencePiece vocabulary: the padding id stands in")
            return v.ids["pad"]
        return t
    # the BPE of "\n" with no special tokens yet, as at that point of llama.cpp's load
    nl = v.core.tokenize(b"\n", False, False)
    if not nl:
        v.warnings.append("\"\\n\" tokenizes to nothing: the padding id stands in for the newline token")
        return v.ids["pad"]
    return nl[0]


def _set_control(v: Vocab, tok: int) -> None:
    if not v.attrs[tok] & ATTR_CONTROL:
        v.warnings.append(f"token {tok} {v.texts[tok]!r} names a control token but is not CONTROL in the GGUF; "
                          "it is made CONTROL")
        v.attrs[tok] |= ATTR_CONTROL


def _named_tokens(v: Vocab, to_id: "_TextIndex") -> None:
    # end-of-turn, end-of-message and FIM tokens found by text when the GGUF does not name them; llama.cpp
    # keeps the first candidate in its token_to_id map's order
    found = {cat: [to_id[_b(t)] for t in _NAMED[cat] if _b(t) in to_id] for cat in _NAMED_ORDER}
    order_rank = None
    for cat in _NAMED_ORDER:
        cands = found[cat]
        if v.ids[cat] != NULL or not cands:
            continue
        if len(cands) > 1:
            if order_rank is None:
                order = _cxx.unordered_map_order(v.texts)
                order_rank = np.empty(v.n_tokens, dtype=np.int64)
                order_rank[np.asarray(order, dtype=np.int64)] = np.arange(v.n_tokens)
            cands = sorted(cands, key=lambda t: order_rank[t])
        v.ids[cat] = cands[0]
        _set_control(v, cands[0])


def _unused_tokens(v: Vocab) -> None:
    for i in np.flatnonzero((v.attrs & ATTR_CONTROL) & ~(v.attrs & ATTR_UNUSED)).tolist():
        # strstr on the C string: the text up to its first NUL
        if b"unused" in v.texts[i].split(b"\0", 1)[0]:
            v.attrs[i] |= ATTR_UNUSED


def _eog_set(v: Vocab, to_id: "_TextIndex") -> set[int]:
    ids = v.ids
    eog: set[int] = set()
    for cat in ("fim_pad", "fim_rep", "fim_sep"):
        if ids[cat] != NULL:
            eog.add(ids[cat])
    for t in _EOG_TEXTS:
        tok = to_id.get(_b(t))
        if tok is not None:
            eog.add(tok)
            _set_control(v, tok)
    for t in _GPT_OSS_USER_DEFINED:
        tok = to_id.get(_b(t))
        if tok is not None:
            v.attrs[tok] = ATTR_USER_DEFINED
    for cat in ("eos", "eot", "eom"):
        if ids[cat] != NULL and ids[cat] not in eog:
            eog.add(ids[cat])
            v.warnings.append(f"the {cat} token {ids[cat]} was not among the end-of-generation tokens; it is added")
    # o200k_harmony / solar-open: "<|end|>" does not end generation when "<|return|>" and "<|call|>" (or
    # "<|calls|>" and "<|flush|>") do
    texts = {t: v.texts[t] for t in eog if 0 <= t < v.n_tokens}
    has = lambda s: any(x == s for x in texts.values())  # noqa: E731
    end_ids = [t for t in sorted(texts) if texts[t] == b"<|end|>"]
    has_call = has(b"<|call|>") or has(b"<|calls|>")
    if end_ids and ((has(b"<|return|>") and has_call) or (has_call and has(b"<|flush|>"))):
        eog.discard(end_ids[-1])
        v.attrs[end_ids[-1]] = ATTR_USER_DEFINED
    # gemma4 / paddleocr: "</s>" does not end generation when "<|tool_response>" does
    s_ids = [t for t in sorted(texts) if texts[t] == b"</s>"]
    if has(b"<|tool_response>") and s_ids:
        eog.discard(s_ids[-1])
        v.attrs[s_ids[-1]] = ATTR_NORMAL
    return eog


def _per_model_attrs(v: Vocab, header: GGUFHeader, to_id: "_TextIndex") -> None:
    name = _key(header, "general.name", ValueType.STRING, "")
    arch = _key(header, "general.architecture", ValueType.STRING, "")
    name_l = _b(name).lower()

    def set_attr(text: str, attr: int, value: bool) -> None:
        tok = to_id.get(_b(text))
        if tok is None:
            raise TokenizerError(f"the model is named like phi-3 but has no token {text!r} "
                                 "(llama.cpp's loader throws out_of_range)")
        v.attrs[tok] = (v.attrs[tok] | attr) if value else (v.attrs[tok] & ~attr)

    if any(s in v.pre for s in ("jina-v2-de", "jina-v2-es", "jina-v2-code")) or \
            any(s in arch for s in ("nomic-bert-moe", "jina-bert-v3")):
        if b"<mask>" in to_id:
            v.attrs[to_id[b"<mask>"]] |= ATTR_LSTRIP
        else:
            v.warnings.append("no <mask> token to give lstrip to")
    elif b"phi-3" in name_l or b"phi3" in name_l:
        for t in v.special_order:
            v.attrs[t] |= ATTR_RSTRIP
        set_attr("</s>", ATTR_RSTRIP, True)
        for t in ("<unk>", "<s>", "<|endoftext|>"):
            set_attr(t, ATTR_RSTRIP, False)
    elif b"modern-bert" in name_l:
        if b"[MASK]" in to_id:
            v.attrs[to_id[b"[MASK]"]] |= ATTR_LSTRIP
        else:
            v.warnings.append("no [MASK] token to give lstrip to")
