"""What Ollama v0.13.3's POST /api/embed and POST /api/embeddings make of a request, before and after the engine
computes its vectors: the inputs, the runner's token checks and the handler's truncation retry, the vector the
runner hands back (which pooling), Ollama's own normalization and `dimensions` in Go's float32 arithmetic, and the
answers' bodies. The handlers (the lease, keep_alive, the engine call) are bankml.server.api.ollama's.

    texts = inputs(req.get("input"))                        # EmbedHandler's switch on req.Input; EmbedError
    plan = Runner(tok, header, num_ctx_opt, run_ctx)         # the runner's tokenization and limits
    tokens = plan.tokens(text, truncate=True)               # the retry of embedWithRetry; EmbedError
    vec = dimensions(normalize(raw), d)                     # server/routes.go normalize, twice with dimensions
    body = embed_body(model, vecs, total_ns, load_ns, n)    # api.EmbedResponse in Go's JSON

Source lines (ollama/ollama tag v0.13.3, 709f842457f40550c88da80f84bc8d7ba29371b9) are named where each rule is.
"""

from __future__ import annotations

import math

import numpy as np

from . import gojson


class EmbedError(Exception):
    """An Ollama answer `{"error": message}` with its status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


INVALID_INPUT = "invalid input type"
NO_INPUT = "Failed to create new sequence: no input provided"
TOO_LONG = "the input length exceeds the context length"
CANNOT_TRUNCATE = "input exceeds maximum context length and cannot be truncated further"
TRUNCATED_TOO_LONG = "input after truncation exceeds maximum context length"


def inputs(value) -> list[str]:
    """server/routes.go:654-675: a non-empty string is one input, an empty one none; an array's elements must
    all be strings (an empty string among them stays an input); null / absent is no input; anything else is 400
    `invalid input type` (as is an array holding a non-string)."""
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            raise EmbedError(400, INVALID_INPUT)
        return list(value)
    if value is None:
        return []
    raise EmbedError(400, INVALID_INPUT)


# --- the runner ------------------------------------------------------------------------------------------------

def pooling(header) -> str:
    """The vector the runner returns (runner/llamarunner/runner.go:526-530): the sequence's pooled embedding
    (llama_get_embeddings_seq) when the model pools, else the embedding of the batch's last output, the last
    token (llama_get_embeddings_ith(iBatch)). The pooling is the GGUF's `<arch>.pooling_type` (the runner's
    context leaves it unspecified, llama/llama.go:121); a file without one (SmolLM2, every chat model) pools
    nothing, so its vector is the last token's: llama-server's `--pooling last`."""
    from ..embeddings import POOLING_TYPES
    p = header.get(f"{header.get('general.architecture', 'llama')}.pooling_type")
    name = POOLING_TYPES.get(int(p), "none") if p is not None else "none"
    return "last" if name == "none" else name


def go_string(b: bytes) -> str:
    """Go's json.Marshal of a string holding these bytes, read back (the handler sends the detokenized text to
    the runner as JSON, llm/server.go:1664): every byte that does not start a valid UTF-8 sequence becomes one
    U+FFFD (encoding/json encodeState.string: utf8.DecodeRuneInString's (RuneError, 1)), not Python's
    one-per-maximal-subpart."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        pass
    out, i, n = [], 0, len(b)
    while i < n:
        c = b[i]
        size = 1 if c < 0x80 else 2 if 0xC2 <= c <= 0xDF else 3 if 0xE0 <= c <= 0xEF else 4 if 0xF0 <= c <= 0xF4 \
            else 0
        if size:
            try:
                out.append(b[i:i + size].decode("utf-8"))
                i += size
                continue
            except UnicodeDecodeError:
                pass
        out.append("\ufffd")
        i += 1
    return "".join(out)


class Runner:
    """The llama runner's embedding request for one text (runner/llamarunner/runner.go:749 embeddings ->
    NewSequence) and EmbedHandler's retry around it (server/routes.go:700-742).

    tok: the model's tokenizer; header: its GGUF header; num_ctx: the request's num_ctx option as merged (the
    retry reads it unclamped, routes.go:722); run_ctx: the runner's context (num_ctx at least 4, at most the
    trained length: what bankml serves of it)."""

    def __init__(self, tok, header, num_ctx: int, run_ctx: int):
        self.tok, self.num_ctx, self.run_ctx = tok, num_ctx, run_ctx
        self.n_ctx_train = int(header.get(f"{header.get('general.architecture', 'llama')}.context_length", 0) or 0)
        self.bos = int(header.get("tokenizer.ggml.bos_token_id", 0) or 0)
        self.eos = int(header.get("tokenizer.ggml.eos_token_id", 0) or 0)

    def sequence(self, text: str) -> list[int]:
        """NewSequence with truncate false (runner.go:757): the text's tokens as s.inputs makes them
        (runner.go:210: add_special on the first part, specials parsed); none is 500 (runner.go:128 / :765), more
        than the context 400 (runner.go:146 / :762)."""
        tokens = self.tok.tokenize(text, True, True)
        if not tokens:
            raise EmbedError(500, NO_INPUT)
        if len(tokens) > self.run_ctx:
            raise EmbedError(400, TOO_LONG)
        return tokens

    def tokens(self, text: str, truncate: bool = True) -> list[int]:
        """embedWithRetry (routes.go:700): the runner's sequence; on its 400, unless `truncate` is false, the text
        re-tokenized as the handler's Tokenize does (llm/server.go:1702: nothing added, specials parsed), cut to
        min(num_ctx, trained length) less one for a missing BOS and one for a missing EOS (routes.go:722-728:
        `add_bos_token` / `add_eos_token` are read under the architecture's prefix, absent, so true), detokenized
        (llm/server.go:1732: the pieces with specials, joined) and sent again."""
        try:
            return self.sequence(text)
        except EmbedError as e:
            if e.status != 400 or not truncate:
                raise
        tokens = self.tok.tokenize(text, False, True)
        ctx_len = min(self.num_ctx, self.n_ctx_train)
        if tokens and tokens[0] != self.bos:
            ctx_len -= 1
        if tokens and tokens[-1] != self.eos:
            ctx_len -= 1
        if len(tokens) <= ctx_len:
            raise EmbedError(400, CANNOT_TRUNCATE)
        if ctx_len <= 0:
            raise EmbedError(400, TRUNCATED_TOO_LONG)
        text = go_string(b"".join(self.tok.token_to_piece(t, True) for t in tokens[:ctx_len]))
        return self.sequence(text)


# --- Ollama's float32 arithmetic ---------------------------------------------------------------------------------

def normalize(vec) -> np.ndarray:
    """server/routes.go:790 normalize, in Go's order on amd64 (no fused multiply-add): a float32 sum, in order,
    of the float32 squares; norm = float32(1 / max(sqrt(float64(sum)), 1e-12)); each element times norm in
    float32."""
    v = np.array(vec, dtype=np.float32)
    s = np.cumsum(v * v, dtype=np.float32)[-1] if v.size else np.float32(0)
    norm = np.float32(1.0 / max(math.sqrt(float(s)), 1e-12))
    return v * norm


def dimensions(vec: np.ndarray, d: int) -> np.ndarray:
    """routes.go:759: 0 < dimensions < len: the first `dimensions` values normalized again; else unchanged."""
    if 0 < d < len(vec):
        return normalize(vec[:d])
    return vec


# --- the answers -------------------------------------------------------------------------------------------------

def embed_body(model: str, vectors: list, total_ns: int = 0, load_ns: int = 0, count: int = 0) -> bytes:
    """api.EmbedResponse (api/types.go:485): model, embeddings ([][]float32, float32's shortest digits), then
    total_duration, load_duration, prompt_eval_count, each left out when zero."""
    d = {"model": model, "embeddings": [[gojson.F32(x) for x in v.tolist()] for v in vectors]}
    for k, x in (("total_duration", total_ns), ("load_duration", load_ns), ("prompt_eval_count", count)):
        if x:
            d[k] = int(x)
    return gojson.dumps(d)


def embedding_body(vector) -> bytes:
    """api.EmbeddingResponse (api/types.go:511): the float32 values as float64 (routes.go:838), float64's
    shortest digits; an empty prompt's `[]` (routes.go:830)."""
    return gojson.dumps({"embedding": [float(x) for x in np.asarray(vector, dtype=np.float32).tolist()]})
