"""Which grammar a request asks for, resolved as llama-server b11192 resolves it.

/completion (tools/server/server-schema.cpp, the field "json_schema" with its alias "grammar"):
    completion_grammar(params)      -> GrammarSpec | None, or ConstrainedRequestError(400, "Field 'json_schema': ...")

/v1/chat/completions (tools/server/server-common.cpp oaicompat_chat_params_parse, then common/chat.cpp):
    schema = chat_json_schema(body)                   # right after the "stop" field is read; may raise
    ... messages validated, template rendered ...
    fmt = chat_response_format(schema, generation_prompt)   # when rendering; may raise (400)
    params = chat_llama_params(body, fmt)             # the grammar keys of llama_params; then the chat request
    spec = completion_grammar(params)                 #   goes through the /completion fields as above

A GrammarSpec's `kind` decides the prefill: "output_format" (a /completion json_schema) and "tool_calls" (the
chat template's response-format grammar, or a /completion request with `grammar_type: "tool_calls"`) are fed
the tokens of the request's generation prompt before sampling; "user" (a GBNF `grammar`) is not. The grammar
text itself is compiled when the sampler is built; a text the engine refuses gives llama-server's 400
"Failed to initialize samplers: failed to parse grammar" (see `SAMPLER_INIT_GRAMMAR_ERROR`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bankml.errors import BankmlError, SchemaError
from bankml.grammar import chat as chat_mod
from bankml.grammar import json_schema as js

USER, OUTPUT_FORMAT, TOOL_CALLS = "user", "output_format", "tool_calls"
SAMPLER_INIT_GRAMMAR_ERROR = "Failed to initialize samplers: failed to parse grammar"


class ConstrainedRequestError(BankmlError):
    """A request refused while resolving its grammar: `status` (400 or 500) and llama-server's `message`
    (the body is llama-server's error JSON with that message; 400 invalid_request_error, 500 server_error)."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}")


# common_grammar_trigger_type
TRIGGER_TOKEN, TRIGGER_WORD, TRIGGER_PATTERN, TRIGGER_PATTERN_FULL = 0, 1, 2, 3


@dataclass
class Trigger:
    type: int
    value: str
    token: int = -1


@dataclass
class GrammarSpec:
    text: str
    kind: str  # USER | OUTPUT_FORMAT | TOOL_CALLS
    lazy: bool = False
    triggers: list = None

    @property
    def needs_prefill(self) -> bool:
        """common_grammar_needs_prefill (and not lazy): the generation prompt's tokens are accepted first"""
        return self.kind in (OUTPUT_FORMAT, TOOL_CALLS) and not self.lazy

    def trigger_args(self) -> tuple[list[str], list[int]]:
        """(patterns, tokens) as common_sampler_init builds them from the triggers"""
        from bankml.grammar.grammar import regex_escape
        patterns, tokens = [], []
        for t in self.triggers or []:
            if t.type == TRIGGER_WORD:
                patterns.append(regex_escape(t.value))
            elif t.type == TRIGGER_PATTERN:
                patterns.append(t.value)
            elif t.type == TRIGGER_PATTERN_FULL:
                v = t.value
                patterns.append("^$" if not v else ("" if v[0] == "^" else "^") + v + ("" if v[-1] == "$" else "$"))
            elif t.type == TRIGGER_TOKEN:
                tokens.append(t.token)
            else:
                raise ConstrainedRequestError(400, f"unknown grammar trigger type {t.type} (llama-server aborts)")
        return patterns, tokens


def _has_value(d: dict, key: str) -> bool:
    return key in d and d[key] is not None


def _json_value_str(d: dict, key: str) -> str:
    """json_value(d, key, std::string()): a non-string value falls back to "" (with a warning in the log)"""
    v = d.get(key) if isinstance(d, dict) else None
    return v if isinstance(v, str) else ""


def completion_grammar_fields(data: dict, tokenize=None) -> GrammarSpec | None:
    """Every grammar field of /completion in llama-server's order: json_schema/grammar, grammar_lazy,
    preserved_tokens, grammar_triggers (other fields lie between them; see docs/json_schema.md)."""
    spec = completion_grammar(data)
    lazy = field_grammar_lazy(data)
    needs_tok = _has_value(data, "preserved_tokens") or _has_value(data, "grammar_triggers")
    if needs_tok and tokenize is None:
        raise ConstrainedRequestError(400, "preserved_tokens / grammar_triggers need the tokenizer")
    preserved = field_preserved_tokens(data, tokenize) if needs_tok else set()
    triggers = field_grammar_triggers(data, tokenize, preserved, lazy) if needs_tok else []
    if spec is not None:
        spec.lazy = lazy
        spec.triggers = triggers
    return spec


def completion_grammar(data: dict) -> GrammarSpec | None:
    """The "json_schema" field (alias "grammar") of llama-server's completion parameters.

    Both present: the grammar wins. A JSON schema converts to an OUTPUT_FORMAT grammar (`{}` means
    {"type": "object"}); a grammar string is USER unless `grammar_type` is "tool_calls". A grammar that is
    not a string, or is empty, means no grammar."""
    if not (_has_value(data, "json_schema") or _has_value(data, "grammar")):
        return None
    field = "json_schema" if _has_value(data, "json_schema") else "grammar"
    if "json_schema" in data and "grammar" not in data:
        schema = data["json_schema"]
        if isinstance(schema, dict) and not schema:
            schema = {"type": "object"}
        try:
            text = js.to_gbnf(schema)
        except SchemaError as e:
            raise ConstrainedRequestError(400, f"Field '{field}': \"json_schema\": {e.message}") from None
        return GrammarSpec(text, OUTPUT_FORMAT)
    text = _json_value_str(data, "grammar")
    if not text:
        return None
    kind = TOOL_CALLS if _json_value_str(data, "grammar_type") == "tool_calls" else USER
    return GrammarSpec(text, kind)


def chat_json_schema(body: dict):
    """The JSON schema of a chat request (or None): its top-level `json_schema`, replaced by
    `response_format`'s. Raises ConstrainedRequestError: 500 "Cannot use both json_schema and grammar",
    400 for an unknown response_format type."""
    schema = body.get("json_schema")
    grammar = _json_value_str(body, "grammar")
    if schema is not None and grammar:
        raise ConstrainedRequestError(500, "Cannot use both json_schema and grammar")
    if "response_format" in body:
        rf = body["response_format"]
        if rf is None:
            rf = {}
        rtype = _json_value_str(rf, "type") if isinstance(rf, dict) else ""
        if rtype == "json_object":
            if (isinstance(rf, dict) and "schema" in rf) or _json_empty(schema):
                s = rf.get("schema") if isinstance(rf, dict) else None
                schema = {} if s is None else s
        elif rtype == "json_schema":
            wrapper = rf.get("json_schema")
            wrapper = {} if wrapper is None else wrapper
            s = wrapper.get("schema") if isinstance(wrapper, dict) else None
            schema = {} if s is None else s
        elif rtype and rtype != "text":
            raise ConstrainedRequestError(
                400, f'response_format type must be one of "text" or "json_object", but got: {rtype}')
    if isinstance(schema, dict) and not schema:
        schema = {"type": "object"}
    return schema


def _json_empty(v) -> bool:
    """nlohmann empty(): null, empty object, empty array (a scalar is not empty)"""
    return v is None or (isinstance(v, (dict, list)) and not v)


def chat_response_format(schema, generation_prompt: str,
                         reasoning_start: str = "") -> chat_mod.ChatResponseFormat | None:
    """The chat template's response-format grammar and answer parser, for a schema that is a non-empty JSON
    object (other schemas do not reach the template; see chat_llama_params). Raises
    ConstrainedRequestError(400, "Unable to generate parser for this template. ...")."""
    if not isinstance(schema, dict) or not schema:
        return None
    try:
        return chat_mod.response_format(schema, generation_prompt, reasoning_start)
    except SchemaError as e:
        raise ConstrainedRequestError(400, e.message) from None


def chat_llama_params(body: dict, fmt: chat_mod.ChatResponseFormat | None) -> dict:
    """The grammar keys of the parameters a chat request is turned into: the template's grammar (type
    tool_calls) when there is a response format, and every body key not produced by the template (so the
    body's own `grammar` or `json_schema` comes through when the template made no grammar)."""
    out: dict = {}
    if fmt is not None and fmt.grammar:
        out["grammar"] = fmt.grammar
        out["grammar_type"] = TOOL_CALLS
    for key in ("grammar", "grammar_type", "json_schema"):
        if key in body and key not in out:
            out[key] = body[key]
    return out



_JSON_TYPE = {type(None): "null", bool: "boolean", int: "number", float: "number", str: "string", list: "array",
              dict: "object"}


def _type_error(want: str, v) -> str:
    return f"[json.exception.type_error.302] type must be {want}, but is {_JSON_TYPE.get(type(v), 'object')}"


def field_grammar_lazy(data: dict, default: bool = False) -> bool:
    """the "grammar_lazy" field (a boolean)"""
    if not _has_value(data, "grammar_lazy"):
        return default
    v = data["grammar_lazy"]
    if not isinstance(v, bool):
        raise ConstrainedRequestError(400, "Field 'grammar_lazy': " + _type_error("boolean", v))
    return v


def field_preserved_tokens(data: dict, tokenize) -> set[int]:
    """the "preserved_tokens" field: strings that tokenize to one token (tokenize(text) with parse_special)"""
    out: set[int] = set()
    if not _has_value(data, "preserved_tokens"):
        return out
    items = data["preserved_tokens"]
    items = list(items.values()) if isinstance(items, dict) else items if isinstance(items, list) else [items]
    for t in items:
        if not isinstance(t, str):
            raise ConstrainedRequestError(400, "Field 'preserved_tokens': " + _type_error("string", t))
        ids = list(tokenize(t))
        if len(ids) == 1:
            out.add(ids[0])
    return out


def field_grammar_triggers(data: dict, tokenize, preserved: set[int], lazy: bool) -> list[Trigger]:
    """the "grammar_triggers" field: [{type, value[, token]}]; a one-token word must be a preserved token and
    becomes a token trigger"""
    out: list[Trigger] = []
    if not _has_value(data, "grammar_triggers"):
        return out
    items = data["grammar_triggers"]
    items = list(items.values()) if isinstance(items, dict) else items if isinstance(items, list) else [items]

    def fail(msg: str):
        raise ConstrainedRequestError(400, "Field 'grammar_triggers': " + msg)

    for t in items:
        if not isinstance(t, dict):
            fail(_type_error("object", t) if t is not None else "[json.exception.type_error.304] cannot use at() with null")
        for key in ("type", "value"):
            if key not in t:
                fail(f"[json.exception.out_of_range.403] key '{key}' not found")
        if isinstance(t["type"], (bool, str, list, dict)) or t["type"] is None:
            fail(_type_error("number", t["type"]))
        ttype = int(t["type"])
        if not isinstance(t["value"], str):
            fail(_type_error("string", t["value"]))
        trig = Trigger(ttype, t["value"])
        if ttype == TRIGGER_TOKEN:
            if "token" not in t:
                fail("[json.exception.out_of_range.403] key 'token' not found")
            if isinstance(t["token"], (bool, str, list, dict)) or t["token"] is None:
                fail(_type_error("number", t["token"]))
            trig.token = int(t["token"])
        if ttype == TRIGGER_WORD:
            ids = list(tokenize(trig.value))
            if len(ids) == 1:
                if ids[0] not in preserved:
                    fail("Grammar trigger word should be marked as preserved token: " + trig.value)
                trig = Trigger(TRIGGER_TOKEN, trig.value, ids[0])
        out.append(trig)
    if lazy and not out:
        fail("Error: no triggers set for lazy grammar!")
    return out


def prefill_tokens(generation_prompt: str, tokens: list[int], piece) -> list[int]:
    """The generation prompt's tokens fed to the grammar (common_sampler_init): `tokens` is
    tokenize(generation_prompt, add_special=False, parse_special=True); a first token whose piece starts with
    whitespace is dropped when the prompt itself does not (some tokenizers add a leading space)."""
    out = []
    for i, t in enumerate(tokens):
        p = piece(t)
        if i == 0 and p[:1].isspace() and not generation_prompt[:1].isspace():
            continue
        out.append(t)
    return out


def sampler_grammar(spec: GrammarSpec | None, vocab, prefill: list[int] = ()):
    """The grammar sampler of common_sampler_init: the compiled grammar, fed the prefill tokens when the
    grammar's kind asks for it. Raises ConstrainedRequestError(400, "Failed to initialize samplers: failed to
    parse grammar"), or (400, "Failed to initialize samplers: std::exception") when the prefill is refused."""
    from bankml.errors import GrammarError
    from bankml.grammar.grammar import Grammar, init_grammar
    if spec is None:
        return None
    try:
        if spec.lazy and spec.text:
            patterns, tokens = spec.trigger_args()
            g = Grammar.parse(spec.text, vocab=vocab, lazy=True, trigger_patterns=patterns, trigger_tokens=tokens)
        else:
            g = init_grammar(spec.text, vocab)
    except GrammarError:
        raise ConstrainedRequestError(400, SAMPLER_INIT_GRAMMAR_ERROR) from None
    if g is not None and spec.needs_prefill:
        try:
            for t in prefill:
                g.accept(t)
        except GrammarError:
            # common_sampler_init logs the grammar and rethrows with `throw e;`, a copy sliced to
            # std::exception: the client sees only "std::exception"
            raise ConstrainedRequestError(400, "Failed to initialize samplers: std::exception") from None
    return g


def error_body(e: ConstrainedRequestError) -> dict:
    """llama-server's error JSON for a refusal (format_error_response)."""
    kind = "invalid_request_error" if e.status == 400 else "server_error"
    return {"error": {"code": e.status, "message": e.message, "type": kind}}
