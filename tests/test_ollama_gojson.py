"""bankml.server.ollama.gojson: Go's encoding/json (go 1.24) as Ollama v0.13.3's gin handlers write and read it.
Each expectation is Go's documented behaviour (encoding/json encode.go, decode.go, scanner.go, stream.go)."""

import pytest

from bankml.server.ollama.gojson import F32, BindError, GoMap, bind, dumps, format_float, go_time


@pytest.mark.parametrize("x,bits,want", [
    (0.1, 64, "0.1"), (1e21, 64, "1e+21"), (1e20, 64, "100000000000000000000"), (1e-7, 64, "1e-7"),
    (123456789.0, 64, "123456789"), (-0.5, 64, "-0.5"), (1.5e-6, 64, "0.0000015"), (5e-324, 64, "5e-324"),
    (1e-6, 64, "0.000001"), (100.0, 64, "100"), (0.0, 64, "0"), (-0.0, 64, "-0"),
    (1.7976931348623157e308, 64, "1.7976931348623157e+308"),
    (0.8, 32, "0.8"), (0.9, 32, "0.9"), (3.14, 32, "3.14"), (1e-7, 32, "1e-7"), (16777216.0, 32, "16777216"),
])
def test_floats(x, bits, want):
    # floatEncoder: shortest digits ('f' or 'e' by magnitude; e-07 written e-7); float32 fields in 32 bits
    assert format_float(x, bits) == want


def test_nan_refused():
    with pytest.raises(ValueError):
        dumps({"x": float("nan")})


def test_strings_and_maps():
    # HTML-safe escaping, \u2028/\u2029, short escapes, other controls as \u00XX; maps sorted, structs in order
    got = dumps({"a": "<x>&\u2028\n\x01\x7f\ud800", "m": GoMap(b=1, a=F32(0.8)), "n": None, "l": [1, 2.5, True]})
    assert got == b'{"a":"\\u003cx\\u003e\\u0026\\u2028\\n\\u0001\x7f\xef\xbf\xbd","m":{"a":0.8,"b":1},"n":null,' \
                  b'"l":[1,2.5,true]}'


def test_time():
    # time.Time.MarshalJSON: RFC 3339 with nanoseconds, trailing zeros dropped; Z for UTC
    assert go_time(1733212345123456000) == "2024-12-03T07:52:25.123456Z"
    assert go_time(1733212345000000000) == "2024-12-03T07:52:25Z"


@pytest.mark.parametrize("raw,struct,want", [
    (b"", "ChatRequest", "EOF"),
    (b"  \n", "ChatRequest", "EOF"),
    (b"{", "ChatRequest", "unexpected EOF"),
    (b'{"model":', "ChatRequest", "unexpected EOF"),
    (b"x", "ChatRequest", "invalid character 'x' looking for beginning of value"),
    (b'{"model" 1}', "ChatRequest", "invalid character '1' after object key"),
    (b'{"model":"a",}', "ChatRequest", "invalid character '}' looking for beginning of object key string"),
    (b'{"model":"a" "b"}', "ChatRequest", "invalid character '\"' after object key:value pair"),
    (b'{"model":"a\\x"}', "ChatRequest", "invalid character 'x' in string escape code"),
    (b'{"model":tru}', "ChatRequest", "invalid character '}' in literal true (expecting 'e')"),
    (b'{"model":-}', "ChatRequest", "invalid character '}' in numeric literal"),
    (b"[1]", "ChatRequest", "json: cannot unmarshal array into Go value of type api.ChatRequest"),
    (b'{"model":1}', "ChatRequest", "json: cannot unmarshal number into Go struct field ChatRequest.model of type "
                                    "string"),
    (b'{"messages":"hi"}', "ChatRequest", "json: cannot unmarshal string into Go struct field ChatRequest.messages "
                                          "of type []api.Message"),
    # Message has its own UnmarshalJSON (an Alias): its error carries the outer context
    (b'{"messages":[{"content":1}]}', "ChatRequest", "json: cannot unmarshal number into Go struct field "
                                                     "ChatRequest.messages.content of type string"),
    (b'{"messages":["hi"]}', "ChatRequest", "json: cannot unmarshal string into Go struct field "
                                            "ChatRequest.messages of type api.Alias"),
    (b'{"messages":[{"images":["!!!"]}]}', "ChatRequest", "illegal base64 data at input byte 0"),
    (b'{"keep_alive":"300"}', "ChatRequest", 'time: missing unit in duration "300"'),
    (b'{"keep_alive":true}', "ChatRequest", "Unsupported type: 'bool'"),
    (b'{"think":"max"}', "ChatRequest", 'invalid think value: "max" (must be "high", "medium", "low", true, or '
                                        'false)'),
    (b'{"think":1}', "ChatRequest", 'think must be a boolean or string ("high", "medium", "low", true, or false)'),
    (b'{"top_logprobs":1.5}', "ChatRequest", "json: cannot unmarshal number 1.5 into Go struct field "
                                             "ChatRequest.top_logprobs of type int"),
    (b'{"options":"x"}', "ChatRequest", "json: cannot unmarshal string into Go struct field ChatRequest.options of "
                                        "type map[string]interface {}"),
    (b'{"context":[1,2.5]}', "GenerateRequest", "json: cannot unmarshal number 2.5 into Go struct field "
                                                "GenerateRequest.context of type int"),
    # the first type error is kept while decoding goes on
    (b'{"stream":"yes","model":2}', "ChatRequest", "json: cannot unmarshal string into Go struct field "
                                                   "ChatRequest.stream of type bool"),
])
def test_bind_errors(raw, struct, want):
    with pytest.raises(BindError) as e:
        bind(raw, struct)
    assert e.value.message == want
    assert e.value.eof == (want == "EOF")


def test_bind_values():
    # case-insensitive keys, null leaves a field unset, the rest of the body after the value is not read,
    # roles lower-cased, format kept as raw JSON, keep_alive validated and kept
    got = bind(b'{"Model":"A","stream":null,"messages":[{"role":"USER","content":"x"}],"format":{"type":"object"},'
               b'"keep_alive":"5m","unknown":1} trailing', "ChatRequest")
    assert got == {"model": "A", "messages": [{"role": "user", "content": "x"}], "format": '{"type":"object"}',
                   "keep_alive": "5m"}
    assert bind(b"null", "ChatRequest") == {}
    assert bind(b'{"images":["aGk="]}', "GenerateRequest") == {"images": [b"hi"]}


def test_raw_message_keeps_numbers():
    # json.RawMessage holds the value's bytes: a schema's integers stay integers
    got = bind(b'{"format":{"type":"object","properties":{"a":{"type":"integer","minimum":1,"x":[1.50,true]}}}}',
               "ChatRequest")
    assert got["format"] == '{"type":"object","properties":{"a":{"type":"integer","minimum":1,"x":[1.50,true]}}}'
