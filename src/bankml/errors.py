"""bankml's exception tree.

Every refusal is one of these, carrying the numbers and names a caller needs; core code raises them and never
prints or exits. The HTTP layer maps each class to llama-server's status and JSON body; the CLI maps them to
exit codes. Nothing here knows about HTTP.
"""

from __future__ import annotations


class BankmlError(Exception):
    """Base of every error bankml raises on purpose."""


class UnsupportedCPU(BankmlError):
    """The CPU lacks an instruction set extension the compiled kernels need."""

    def __init__(self, missing: list[str]):
        self.missing = list(missing)
        super().__init__(
            "bankml's kernels need x86-64 with AVX2, FMA, F16C and BMI2 (llama.cpp's 'haswell' level); "
            "this CPU lacks: " + ", ".join(self.missing))


class GGUFError(BankmlError):
    """A GGUF file is malformed; `reason` says how and `offset` where (bytes from the start)."""

    def __init__(self, reason: str, offset: int | None = None):
        self.reason = reason
        self.offset = offset
        where = f" (at byte {offset})" if offset is not None else ""
        super().__init__(reason + where)


class GGUFTruncated(GGUFError):
    """The bytes end before the header (or the data it declares) does: more of the file is needed."""


class ModelRefused(BankmlError):
    """The guard refuses a model: `reasons` lists everything the engine cannot run or trust. `verdict` is the
    guard's: "refuse", or "need_more" when the file is only cut short."""

    def __init__(self, path: str, reasons: list[str], verdict: str = "refuse"):
        self.path = path
        self.reasons = list(reasons)
        self.verdict = verdict
        what = "refused" if verdict == "refuse" else "incomplete"
        super().__init__(f"{path}: {what}: " + "; ".join(self.reasons))


class PinMismatch(BankmlError):
    """A model's bytes do not match its FORK.json pin (or it has no pin)."""

    def __init__(self, path: str, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class ModelFileChanged(BankmlError):
    """A mapped model file changed while the engine was reading it (rewritten in place, cut or extended): what was
    computed since is thrown away, and the file must be verified again before it is served."""

    def __init__(self, path: str, how: str):
        self.path = path
        self.how = how
        super().__init__(f"the model file {path} changed while it was in use ({how}); this request is stopped, "
                         "and the model is verified again before it serves another")


class PullError(BankmlError):
    """A model could not be fetched from its package registry."""


class UnsupportedFlag(BankmlError):
    """A command-line flag that bankml does not implement (yet)."""

    def __init__(self, flag: str, why: str = "not supported by bankml yet"):
        self.flag = flag
        super().__init__(f"{flag}: {why}")


class GrammarError(BankmlError):
    """A GBNF grammar that llama.cpp refuses (parse error, undefined rule, no root, left recursion), or one it
    cannot run to an end (then the reason says so). llama-server answers every such grammar with 400
    "Failed to initialize samplers: failed to parse grammar"; `str(e)` is bankml's own account of why."""


class SchemaError(BankmlError):
    """A JSON schema that llama.cpp's converter refuses. `message` is the exception text the oracle carries,
    to the letter (e.g. "JSON schema conversion failed:\\nJSON schema error at #: unrecognized type x");
    the request layer wraps it as llama-server does on /completion and on chat."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


class TokenizerError(BankmlError):
    """A vocabulary llama.cpp would refuse to load, or a text or token it would refuse."""


class UnsupportedTokenizer(TokenizerError):
    """A vocabulary llama.cpp b11192 loads but bankml does not reproduce yet; `feature` names what is missing."""

    def __init__(self, feature: str, why: str = "not implemented by bankml's tokenizer yet"):
        self.feature = feature
        super().__init__(f"{feature}: {why}")


class InvalidToken(TokenizerError, IndexError):
    """A token id outside the vocabulary."""

    def __init__(self, token: int, n_vocab: int):
        self.token = token
        self.n_vocab = n_vocab
        super().__init__(f"token id {token} is out of the vocabulary (0..{n_vocab - 1})")


class ForwardError(BankmlError):
    """The forward pass refuses a call (bankml.engine); nothing in the KV cache changed."""


class ContextFull(ForwardError):
    """The tokens of a decode call do not fit in the KV cache: positions n_past .. n_past+n_tokens-1 are needed,
    the cache holds n_ctx cells (llama_decode fails the same way: no KV slot for the batch)."""

    def __init__(self, n_past: int, n_tokens: int, n_ctx: int):
        self.n_past = n_past
        self.n_tokens = n_tokens
        self.n_ctx = n_ctx
        super().__init__(f"{n_tokens} tokens after {n_past} cached ones need {n_past + n_tokens} cells; the "
                         f"context holds {n_ctx}")


class PositionMismatch(ForwardError):
    """A decode call must continue the cached sequence: its first position must be n_past (llama.cpp requires
    Y = X + 1 for the batch's first position Y and the cache's last X)."""

    def __init__(self, pos: int, n_past: int):
        self.pos = pos
        self.n_past = n_past
        super().__init__(f"decode at position {pos}, but the cache holds positions 0..{n_past - 1}: the next "
                         f"position is {n_past} (truncate the cache first to go back)")
