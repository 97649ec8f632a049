"""bankml.server.ollama.options: DefaultOptions, FromMap's type rules (api/types.go:784, v0.13.3), the merge order
(server/routes.go:107) and the llama-server fields (llm/server.go:1513 for num_predict)."""

import pytest

from bankml.server.ollama import options as o


def test_defaults_are_ollamas():
    d = o.defaults({})
    assert (d["num_predict"], d["num_keep"], d["temperature"], d["top_k"], d["top_p"], d["typical_p"],
            d["repeat_last_n"], d["repeat_penalty"], d["seed"], d["min_p"], d["num_ctx"]) == \
        (-1, 4, 0.8, 40, 0.9, 1.0, 64, 1.1, -1, 0.0, 4096)
    assert o.defaults({"OLLAMA_CONTEXT_LENGTH": "2048"})["num_ctx"] == 2048


def test_int_options_take_any_number_and_truncate():
    d = o.from_map(o.defaults({}), {"top_k": 7.9, "num_ctx": -3.5, "seed": 12})
    assert (d["top_k"], d["num_ctx"], d["seed"]) == (7, -3, 12)


@pytest.mark.parametrize("key,val,msg", [
    ("top_k", "5", 'option "top_k" must be of type integer'),
    ("top_k", True, 'option "top_k" must be of type integer'),
    ("temperature", "hot", 'option "temperature" must be of type float32'),
    ("use_mmap", 1, 'option "use_mmap" must be of type boolean'),
    ("stop", "x", 'option "stop" must be of type array'),
    ("stop", ["a", 1], 'option "stop" must be of an array of strings'),
])
def test_type_errors(key, val, msg):
    with pytest.raises(o.OptionError) as e:
        o.from_map(o.defaults({}), {key: val})
    assert e.value.message == msg


def test_null_skipped_and_unknown_logged(caplog):
    d = o.from_map(o.defaults({}), {"temperature": None, "mirostat": 2})
    assert d["temperature"] == 0.8 and "mirostat" not in d
    assert "invalid option provided option=mirostat" in caplog.text


def test_merge_order():
    d = o.merged({"temperature": 0.1, "top_k": 3}, {"top_k": 9}, environ={})
    assert (d["temperature"], d["top_k"]) == (0.1, 9)


def test_num_predict_mapping():
    assert o.n_predict({"num_predict": -1}, 100) == 1000
    assert o.n_predict({"num_predict": 0}, 100) == 1000
    assert o.n_predict({"num_predict": 1001}, 100) == 1000
    assert o.n_predict({"num_predict": 17}, 100) == 17


def test_llama_fields_send_every_sampling_field():
    f = o.llama_fields(o.defaults({}), 4096)
    assert f == {"n_predict": 40960, "temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0, "typical_p": 1.0,
                 "repeat_last_n": 64, "repeat_penalty": 1.1, "presence_penalty": 0.0, "frequency_penalty": 0.0,
                 "seed": -1, "stop": []}


def test_effective_ctx():
    d = o.defaults({})
    assert o.effective_ctx(dict(d, num_ctx=2), 8192, 4096) == 4
    assert o.effective_ctx(dict(d, num_ctx=9000), 8192, 16384) == 8192
    assert o.effective_ctx(dict(d, num_ctx=6000), 8192, 4096) == 4096


def test_format():
    assert o.format_fields(None, True) == {} and o.format_fields("null", True) == {} and o.format_fields('""', 1) == {}
    assert o.format_fields('"json"', True) == {"response_format": {"type": "json_object"}}
    assert o.format_fields('"json"', False) == {"json_schema": {"type": "object"}}
    s = '{"type":"object"}'
    assert o.format_fields(s, True) == {"response_format": {"type": "json_schema",
                                                            "json_schema": {"schema": {"type": "object"}}}}
    with pytest.raises(o.FormatError) as e:
        o.format_fields('"xml"', True)
    assert e.value.message == 'invalid format: "\\"xml\\""; expected "json" or a valid JSON Schema object'
