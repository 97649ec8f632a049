"""llama-server b11192's POST /tokenize and POST /detokenize (tools/server/server-context.cpp), as Starlette routes.

    from bankml.server.api.tokenize import routes      # mount on the app; app.state.tokenizer must be set

/tokenize  {"content": str | [str | int, ...], "add_special": false, "parse_special": true, "with_pieces": false}
           -> {"tokens": [ids]} or, with pieces, {"tokens": [{"id": id, "piece": str | [bytes]}]}
/detokenize {"tokens": [ids]} -> {"content": str}

Behaviour reproduced from the oracle (tests/oracle/tokenizer/http.json):
- a body that is not an object, or has no "content"/"tokens", answers an empty result;
- add_special / parse_special / with_pieces that are not booleans fall back to their defaults (json_value);
- in a mixed content array only the first element, when it is a string, gets add_special; other elements are
  ids converted as nlohmann converts numbers to int (floats truncated, out of range -> INT_MIN, booleans 0/1,
  wide integers wrapped to 32 bits), not checked against the vocabulary unless pieces are asked for;
- a piece that is not valid UTF-8 (llama-server's loose is_valid_utf8) is an array of its byte values;
- /detokenize joins the pieces (special tokens rendered), with no space clean-up, and any invalid UTF-8 in
  the result becomes U+FFFD when the JSON is written;
- errors are 500 {"error": {"code": 500, "message": ..., "type": "server_error"}}: nlohmann's type errors
  ("[json.exception.type_error.302] type must be string, but is number") and libstdc++'s range check for an
  id outside the vocabulary ("vector::_M_range_check: __n (which is N) >= this->size() (which is V)").

The body is parsed by bankml.cxx.nljson (nlohmann's acceptance and error messages), or by
`request.app.state.parse_json(raw: bytes)` when the app provides one (raising bankml.cxx.nljson.JSONParseError).
"""

from __future__ import annotations

import json
import math

from ...cxx.nljson import JSONParseError, NLError, loads, type_must_be

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..http import off_loop
from ..routing import tokenizer_of

INT_MIN = -(1 << 31)


class _Refusal(Exception):
    """An exception llama-server's handler wrapper turns into a 500 with this message."""


def to_int32(v) -> int:
    """nlohmann's get<int32_t>() of a JSON number or boolean (anything else: type error)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        if -(1 << 63) <= v < (1 << 64):            # stored as int64 / uint64: static_cast wraps
            v &= 0xFFFFFFFF
            return v - (1 << 32) if v >= (1 << 31) else v
        v = float(v)                                # wider: nlohmann stores a double
    if isinstance(v, float):
        if math.isnan(v) or not (-2147483649.0 < v < 2147483648.0):
            return INT_MIN                          # cvttsd2si's answer outside int32
        return int(v)
    raise type_must_be("number", v)


def _json_bool(body: dict, key: str, default: bool) -> bool:
    # json_value(body, key, default): a wrong type falls back to the default
    v = body.get(key)
    return v if isinstance(v, bool) else default


def _range_check(token: int, n_vocab: int) -> _Refusal:
    n = token if token >= 0 else token + (1 << 64)
    return _Refusal(f"vector::_M_range_check: __n (which is {n}) >= this->size() (which is {n_vocab})")


def valid_utf8_loose(b: bytes) -> bool:
    """llama-server's is_valid_utf8: lead bytes and continuation bytes only (overlong forms, surrogates and
    codepoints past U+10FFFF pass)."""
    i, n = 0, len(b)
    while i < n:
        c = b[i]
        if c <= 0x7F:
            k = 1
        elif c & 0xE0 == 0xC0:
            k = 2
        elif c & 0xF0 == 0xE0:
            k = 3
        elif c & 0xF8 == 0xF0:
            k = 4
        else:
            return False
        if n - i < k or any(x & 0xC0 != 0x80 for x in b[i + 1:i + k]):
            return False
        i += k
    return True


def json_text(b: bytes) -> str:
    """A std::string as llama-server writes it into JSON (invalid UTF-8 replaced by U+FFFD)."""
    return b.decode("utf-8", "replace")


def _tokenize_mixed(tok, content, add_special: bool, parse_special: bool) -> list[int]:
    if isinstance(content, list):
        out: list[int] = []
        first = True
        for p in content:
            if isinstance(p, str):
                out += tok.tokenize(p, add_special and first, parse_special)
            else:
                out.append(to_int32(p))
            first = False
        return out
    if not isinstance(content, str):
        raise type_must_be("string", content)
    return tok.tokenize(content, add_special, parse_special)


def tokenize_body(tok, body) -> dict:
    """The answer of POST /tokenize to a parsed body (raises NLError or _Refusal: a 500 with its message)."""
    if not isinstance(body, dict) or "content" not in body:
        return {"tokens": []}
    add_special = _json_bool(body, "add_special", False)
    parse_special = _json_bool(body, "parse_special", True)
    with_pieces = _json_bool(body, "with_pieces", False)
    ids = _tokenize_mixed(tok, body["content"], add_special, parse_special)
    if not with_pieces:
        return {"tokens": ids}
    out = []
    for t in ids:
        if not 0 <= t < tok.n_vocab:
            raise _range_check(t, tok.n_vocab)
        piece = tok.token_to_piece(t, True)
        out.append({"id": t, "piece": json_text(piece) if valid_utf8_loose(piece) else list(piece)})
    return {"tokens": out}


def detokenize_body(tok, body) -> dict:
    """The answer of POST /detokenize to a parsed body (raises NLError or _Refusal: a 500 with its message)."""
    if not isinstance(body, dict) or "tokens" not in body:
        return {"content": ""}
    tokens = body["tokens"]
    if not isinstance(tokens, list):
        raise type_must_be("array", tokens)
    ids = [to_int32(t) for t in tokens]
    for t in ids:
        if not 0 <= t < tok.n_vocab:
            raise _range_check(t, tok.n_vocab)
    return {"content": json_text(tok.join_pieces(ids, special=True))}


def _json_response(obj, status: int = 200) -> Response:
    # nlohmann's dump(): compact, keys sorted (std::map), UTF-8 as is
    data = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return Response(data.encode("utf-8", "surrogatepass"), status_code=status,
                    media_type="application/json; charset=utf-8")


def server_error(message: str) -> Response:
    return _json_response({"error": {"code": 500, "message": message, "type": "server_error"}}, 500)


def _answer(parse, raw: bytes, tok, fn) -> Response:
    try:
        body = parse(raw)
    except JSONParseError as e:
        return server_error(str(e))
    try:
        return _json_response(fn(tok, body))
    except (_Refusal, NLError) as e:
        return server_error(str(e))


async def _handle(request: Request, fn) -> Response:
    raw = await request.body()
    parse = getattr(request.app.state, "parse_json", None) or loads
    # the parse, the tokenizer and the answer's JSON on a worker thread, off the event loop
    return await off_loop(_answer, parse, raw, tokenizer_of(request), fn)


async def tokenize(request: Request) -> Response:
    return await _handle(request, tokenize_body)


async def detokenize(request: Request) -> Response:
    return await _handle(request, detokenize_body)


routes = [
    Route("/tokenize", tokenize, methods=["POST"]),
    Route("/detokenize", detokenize, methods=["POST"]),
]
