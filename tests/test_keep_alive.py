"""Ollama v0.13.3's keep-alive as bankml.server.keep_alive reads it: Go's time.ParseDuration (its results and its
error messages), api.Duration's JSON rules and $OLLAMA_KEEP_ALIVE, and what the residency is given."""

import pytest

from bankml.server import keep_alive as ka

S = 10**9


@pytest.mark.parametrize("text,ns", [
    ("0", 0), ("-0", 0), ("+0", 0), ("5m", 300 * S), ("1h30m", 5400 * S), ("1.5s", 3 * S // 2),
    ("300ms", 300 * 10**6), (".5s", S // 2), ("1.s", S), ("+5s", 5 * S), ("-1m", -60 * S),
    ("1h1m1s1ms1us1ns", 3661 * S + 10**6 + 10**3 + 1), ("2\u00b5s", 2000), ("2\u03bcs", 2000),
    ("0.0000000001s", 0), ("1.0000000001s", S), ("2562047h47m16.854775807s", (1 << 63) - 1),
    ("1000000000000000000ns", 10**18),
])
def test_go_durations(text, ns):
    assert ka.parse_go_duration(text) == ns


@pytest.mark.parametrize("text,message", [
    ("", 'time: invalid duration ""'),
    ("-1", 'time: missing unit in duration "-1"'),
    ("5", 'time: missing unit in duration "5"'),
    ("5d", 'time: unknown unit "d" in duration "5d"'),
    ("abc", 'time: invalid duration "abc"'),
    ("1h-5m", 'time: unknown unit "h-" in duration "1h-5m"'),     # a unit runs to the next digit or '.'

    (".s", 'time: invalid duration ".s"'),
    ("2562047h47m16.854775808s", 'time: invalid duration "2562047h47m16.854775808s"'),
    ('5"s', 'time: unknown unit "\\"s" in duration "5\\"s"'),
    ("5\u00e9", 'time: unknown unit "\\xc3\\xa9" in duration "5\\xc3\\xa9"'),
])
def test_go_duration_errors(text, message):
    with pytest.raises(ValueError) as e:
        ka.parse_go_duration(text)
    assert str(e.value) == message


@pytest.mark.parametrize("value,ns", [
    (0, 0), (10, 10 * S), (1.5, 3 * S // 2), (-1, ka.FOREVER), (-0.5, ka.FOREVER), ("10m", 600 * S),
    ("-1m", ka.FOREVER), ("0", 0), (1e300, -(1 << 63)),
])
def test_json_values(value, ns):
    assert ka.from_json(value) == ns


@pytest.mark.parametrize("value,message", [
    (True, "Unsupported type: 'bool'"), ([1], "Unsupported type: '[]interface {}'"),
    ({}, "Unsupported type: 'map[string]interface {}'"), ("-1", 'time: missing unit in duration "-1"'),
])
def test_json_refusals(value, message):
    with pytest.raises(ValueError) as e:
        ka.from_json(value)
    assert str(e.value) == message


@pytest.mark.parametrize("env,ns", [
    ({}, 300 * S), ({"OLLAMA_KEEP_ALIVE": ""}, 300 * S), ({"OLLAMA_KEEP_ALIVE": "10m"}, 600 * S),
    ({"OLLAMA_KEEP_ALIVE": " '30s' "}, 30 * S), ({"OLLAMA_KEEP_ALIVE": "3600"}, 3600 * S),
    ({"OLLAMA_KEEP_ALIVE": "-1"}, ka.FOREVER), ({"OLLAMA_KEEP_ALIVE": "0"}, 0),
    ({"OLLAMA_KEEP_ALIVE": "nonsense"}, 300 * S), ({"OLLAMA_KEEP_ALIVE": "1.5"}, 300 * S),
])
def test_environment(env, ns):
    assert ka.default_ns(env) == ns


def test_what_the_residency_is_given():
    assert ka.to_seconds(ka.FOREVER) is None
    assert ka.to_seconds(0) == 0 and ka.to_seconds(-(1 << 63)) == 0
    assert ka.to_seconds(90 * S) == 90.0
